"""One codec for the records kept as JSON in a row (a run's ``pinned``, its ``metrics``): a
record decodes its stored JSON key by key (``decoded``: each known key converted to its
attribute, the keys it does not know kept as they were, in ``extra``) and encodes it back
(``encoded``) with the keys as stored, in their order (``keys``), so a row re-encodes byte
for byte: the fingerprint compares the stored text. What writes a record builds it
(``made``: its keys in the order given, as the dict it replaces was written; ``extended``:
keys added after the ones it has), never a dict to decode."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Self, TypeVar, cast

JSON = Mapping[str, Any]  # another record's stored JSON, kept as stored
Convert = dict[str, Callable[[Any], Any]]
_R = TypeVar("_R")
_ATTRIBUTES = {"pass": "passing"}  # a stored key that is no Python name -> its attribute
_KEYS = {attr: key for key, attr in _ATTRIBUTES.items()}
_FRESH = ("memo",)  # a field that is no value of the record's: a new one per record


def _same(value: Any) -> Any:
    return value


def decoded(cls: Callable[..., _R], data: Mapping[str, Any], convert: Convert) -> _R:
    """The record of stored JSON: each known key converted to its attribute, the rest kept."""
    known = {f.name for f in dataclasses.fields(cast(Any, cls))} - {"keys", "extra", "memo"}
    values, extra = {}, {}
    for key, value in data.items():
        attr = _ATTRIBUTES.get(key, key)
        if attr in known:
            values[attr] = convert.get(attr, _same)(value)
        else:
            extra[key] = value
    return cls(**values, keys=tuple(data), extra=MappingProxyType(extra))


def made(cls: Callable[..., _R], **values: Any) -> _R:
    """The record written with ``values`` (by attribute): stored with those keys, in the order
    given (a value None is stored as null; an attribute not given is stored absent)."""
    return cls(**values, keys=tuple(_KEYS.get(attr, attr) for attr in values), extra=MappingProxyType({}))


def extended(record: _R, **values: Any) -> _R:
    """The record with ``values`` (by attribute) set: a key it had keeps its place, a new one
    comes after the rest, in the order given."""
    written = cast(Any, record)
    keys = tuple(written.keys or ())
    added = tuple(k for k in (_KEYS.get(attr, attr) for attr in values) if k not in keys)
    fresh: dict[str, Any] = {name: {} for name in _FRESH if name in {f.name for f in dataclasses.fields(written)}}
    return cast(_R, dataclasses.replace(written, **values, **fresh, keys=keys + added))


def encoded(record: Any, convert: Convert) -> dict[str, Any]:
    """The stored JSON of a record: its keys as stored, in their order."""
    out = {}
    for key in record.keys:
        if key in record.extra:
            out[key] = record.extra[key]
        else:
            attr = _ATTRIBUTES.get(key, key)
            out[key] = convert.get(attr, _same)(getattr(record, attr))
    return out


def listed(value: Any) -> Any:
    return None if value is None else list(value)


def tupled(value: Any) -> Any:
    return None if value is None else tuple(value)


class JsonRecord:
    """A record kept as JSON: read from it (``of``), built by what writes it (``made``,
    ``extended``), written back (``to_json``), and false when its JSON was an empty mapping. A
    subclass is a frozen dataclass with ``keys`` and ``extra`` fields; ``DECODE`` and
    ``ENCODE`` say how an attribute that is not plain JSON converts."""

    DECODE: ClassVar[Convert] = {}
    ENCODE: ClassVar[Convert] = {}
    keys: tuple[str, ...]

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Self:
        return decoded(cls, data, cls.DECODE)

    @classmethod
    def made(cls, **values: Any) -> Self:
        """The record written with ``values`` (by attribute, in the order given)."""
        return made(cls, **values)

    def extended(self, **values: Any) -> Self:
        """The record with ``values`` written (a key it had keeps its place, a new one comes after)."""
        return extended(self, **values)

    def to_json(self) -> dict[str, Any]:
        return encoded(self, self.ENCODE)

    def __bool__(self) -> bool:  # as the JSON it was: an empty mapping is no record
        return bool(self.keys)
