"""The service's values on the wire: ``encode`` turns the domain API's frozen dataclasses
(reports, datasets, versions, live prompts, tokens) into JSON-ready data, and
``decode(cls, data)`` builds the very same dataclass back from it, guided by its field
types. The HTTP service (``gate.service``) encodes what ``Gate`` returns and the client
(``gate.client.remote``) decodes it, so the CLI renders a report read over HTTP with the same
code, to the same text, as one read from the database.

Exact numbers stay exact: a ``Decimal`` travels as its text, a datetime as ISO 8601. Where
no field type says what a value is (a metrics dict, a dataset row), a Decimal travels as
``{"$decimal": text}``; so that untrusted data shaped like that tag is never read as one,
every dict with a key starting with ``$`` is sent wrapped as ``{"$map": dict}``."""

from __future__ import annotations

import dataclasses
import datetime as dt
import types
import typing
from decimal import Decimal
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")
DECIMAL_TAG = "$decimal"
MAP_TAG = "$map"


def encode(value: Any) -> Any:
    """JSON-ready data for a dataclass, list, dict, Decimal or datetime (recursively). A
    Decimal inside an untyped dict keeps its type through a ``{"$decimal": text}`` tag."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        encoded = {str(k): encode(v) for k, v in value.items()}
        return {MAP_TAG: encoded} if any(k.startswith("$") for k in encoded) else encoded
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, Decimal):
        return {DECIMAL_TAG: str(value)}
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return value


def decode(cls: type[T], data: Any) -> T:
    """The value of type ``cls`` that ``encode`` turned into ``data``."""
    return _decode(cls, data)


@cache
def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _decode(tp: Any, data: Any) -> Any:
    if data is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        return _decode(options[0], data) if len(options) == 1 else _untyped(data)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):  # a hint is a class, never an instance
        hints = _hints(tp)
        return tp(**{f.name: _decode(hints[f.name], data[f.name]) for f in dataclasses.fields(tp) if f.name in data})
    if origin in (list, tuple):
        (item,) = typing.get_args(tp)[:1] or (Any,)
        return [_decode(item, v) for v in data] if origin is list else tuple(_decode(item, v) for v in data)
    if origin is dict:
        key, val = typing.get_args(tp) or (Any, Any)
        items = data[MAP_TAG] if _tagged(data, MAP_TAG) else data
        return {(int(k) if key is int else k): _decode(val, v) for k, v in items.items()}
    if tp is Decimal:
        return Decimal(data[DECIMAL_TAG] if isinstance(data, dict) else str(data))
    if tp is dt.datetime:
        return dt.datetime.fromisoformat(data)
    return _untyped(data)


def _untyped(data: Any) -> Any:
    """Data of no declared type (a metrics dict): plain JSON, with tagged Decimals restored."""
    if isinstance(data, dict):
        if _tagged(data, DECIMAL_TAG):
            return Decimal(data[DECIMAL_TAG])
        if _tagged(data, MAP_TAG):
            return {k: _untyped(v) for k, v in data[MAP_TAG].items()}
        return {k: _untyped(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_untyped(v) for v in data]
    return data


def _tagged(data: Any, tag: str) -> bool:
    return isinstance(data, dict) and len(data) == 1 and tag in data
