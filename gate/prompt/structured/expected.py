"""A dataset row's expected object, for prompts decided field by field.

A row gives either one label (its label column, default ``expected_decision``) or, when
it has none, an expected object: an ``expected`` column holding a JSON object (JSONL), or
``expected.<field>`` columns (CSV, or a SQL source's column aliases). In a CSV every cell
is text: an empty cell is no value (the field is missing from that row), a cell holding
a JSON array (``["a", "b"]``) is a list, and numbers stay text that the ``number``
comparator reads as numbers.

The object is stored as canonical JSON in the row's label column (``expected_decision``):
the rule of a fields prompt knows to read it so, and a version whose rows give objects
says so in its summary (``gate.prompt.structured.summary``). Every value must be comparable by
some comparator — a scalar, or a list of scalars — and bounded (``MAX_VALUE_CHARS`` as
JSON); anything else is refused at import, naming the row and the field. This module is
on the import's hot path and imports nothing heavier than ``rule``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from gate.errors import DatasetError

from .rule import MAX_FIELDS, MAX_VALUE_CHARS, NAME_RE, canonical

EXPECTED_COLUMN = "expected"
EXPECTED_PREFIX = "expected."
PROTECTED_COLUMN = "protected"
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no", "")


def expected_object(record: Mapping[str, Any]) -> tuple[dict | None, tuple[str, ...]]:
    """(the row's expected object, the columns it was read from); (None, ()) when the row
    has neither an ``expected`` object nor ``expected.<field>`` columns."""
    whole = record.get(EXPECTED_COLUMN)
    if isinstance(whole, dict):
        return dict(whole), (EXPECTED_COLUMN,)
    columns = tuple(k for k in record if isinstance(k, str) and k.startswith(EXPECTED_PREFIX))
    if not columns:
        return None, ()
    found = {}
    for column in columns:
        value = _cell(record[column])
        if value is not None:
            found[column[len(EXPECTED_PREFIX) :]] = value
    return found, columns


def _cell(value: Any) -> Any:
    """A column's value as an expected value: text trimmed, an empty cell none, a cell that
    is a JSON array a list."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        return None
    if text.startswith("[") and len(text) <= MAX_VALUE_CHARS:
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            return text
        return parsed if isinstance(parsed, list) else text
    return text


def checked_expected(obj: dict, where: str) -> str:
    """The expected object as canonical JSON, or a DatasetError naming the row (``where``)
    and the field: no field, too many, a name the gate cannot address, a value no
    comparator can compare."""
    if not obj:
        raise DatasetError(f"{where}: the expected object has no field")
    if len(obj) > MAX_FIELDS:
        raise DatasetError(f"{where}: the expected object has {len(obj)} fields: at most {MAX_FIELDS}")
    for name, value in obj.items():
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise DatasetError(
                f"{where}: expected field {str(name)[:40]!r} is not a field name (letters, digits "
                "and _, starting with a letter or _, at most 64 characters)"
            )
        problem = _uncomparable(value)
        if problem:
            raise DatasetError(f"{where}: expected field {name} {problem}")
    return canonical(obj)


def _uncomparable(value: Any) -> str | None:
    """Why no comparator can compare ``value``, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number"
    if isinstance(value, dict):
        return "is an object: the gate compares text, numbers, booleans, null and lists of those"
    if isinstance(value, list):
        if any(isinstance(v, (dict, list)) for v in value):
            return "is a list holding lists or objects: the gate compares lists of text, numbers and booleans"
        if any(isinstance(v, float) and not math.isfinite(v) for v in value):
            return "holds a number that is not finite"
        size = len(canonical(value))
    elif value is None or isinstance(value, (str, bool, int, float)):
        size = len(value) if isinstance(value, str) else len(str(value))
    else:
        return f"is a {type(value).__name__}, not a JSON value"
    if size > MAX_VALUE_CHARS:
        return f"is {size} characters long: at most {MAX_VALUE_CHARS}"
    return None


def protected_flag(value: Any, where: str) -> bool:
    """A row's ``protected`` column: true or false (a CSV's true/false, 1/0, yes/no, or
    empty for false)."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    text = str(value).strip().casefold()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise DatasetError(f"{where}: protected is {str(value)[:40]!r}: use true or false")
