"""What an answer read for a fields decision (``reading``) is held against: the item's
expected object (canonical JSON, from the dataset). The item is a MATCH when every declared
field matches; each field's outcome is kept as a bit of two masks (bit *i*: the *i*-th
field in name order), ``wrong`` (did not match, missing included) and ``missing`` (not in
the answer at all; every bit of both when the answer held no JSON object). Finalize and
reconcile count fields from those masks in SQL, never re-reading an item.

Numbers compare as decimals (``Decimal`` of the JSON literal, or of the float's shortest
repr), so a tolerance holds at its edge: 12.49 is within 0.01 of 12.50. NaN and the
infinities are no numbers. A string is a number when it is one plainly (``-12.5``,
``1e3``; no thousands separators or currency signs).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Context, Decimal, InvalidOperation
from typing import Any

from gate.prompt.decision import first_word_label

from .reading import parse_read
from .rule import FieldSpec, FieldsRule, NormalForm, normal_text

_NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?")
_CONTEXT = Context(prec=120)
_MAX_NUMBER_CHARS = 64


@dataclass(frozen=True)
class Outcome:
    match: bool
    wrong: int  # bits of the fields that did not match (missing ones included)
    missing: int  # bits of the fields the answer did not have


def score(rule: FieldsRule, actual: str | None, expected: str) -> Outcome:
    """An item's answer (``reading.read_answer``'s text) against its expected object."""
    read = parse_read(actual)
    if read is None:
        return Outcome(False, rule.all_bits, rule.all_bits)
    wanted = parse_read(expected) or {}
    wrong = missing = 0
    for i, spec in enumerate(rule.fields):
        if spec.name not in read:
            wrong |= 1 << i
            missing |= 1 << i
        elif spec.name not in wanted or not field_matches(spec, read[spec.name], wanted[spec.name]):
            wrong |= 1 << i
    return Outcome(wrong == 0, wrong, missing)


def field_matches(spec: FieldSpec, actual: Any, expected: Any) -> bool:
    """One field's comparator."""
    if spec.type == "label":
        return _label(spec, actual, expected)
    if spec.type == "number":
        return _number(spec, actual, expected)
    if spec.type == "text":
        return (
            actual is None
            and expected is None
            or _is_scalar(actual)
            and _is_scalar(expected)
            and _text(actual, spec.normalize) == _text(expected, spec.normalize)
        )
    if spec.type == "list":
        return _list(spec, actual, expected)
    return same_value(actual, expected)


def same_value(a: Any, b: Any) -> bool:
    """``exact``: the same JSON value; numbers by value, never a number equal to a boolean
    or a string."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if _is_number(a) and _is_number(b):
        return to_decimal(a) == to_decimal(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, bool, int, float))


def to_decimal(value: Any) -> Decimal | None:
    """A JSON number, or a string that is plainly one, as an exact decimal; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value)) if value == value and abs(value) != float("inf") else None
    if isinstance(value, str):
        text = value.strip()
        if len(text) <= _MAX_NUMBER_CHARS and _NUMBER_RE.fullmatch(text):
            try:
                return Decimal(text)
            except InvalidOperation:
                return None
    return None


def _number(spec: FieldSpec, actual: Any, expected: Any) -> bool:
    if actual is None or expected is None:
        return actual is None and expected is None
    a, e = to_decimal(actual), to_decimal(expected)
    if a is None or e is None:
        return False
    gap = _CONTEXT.abs(_CONTEXT.subtract(a, e))
    if gap == 0:
        return True
    if spec.tolerance is not None and gap <= spec.tolerance:
        return True
    return spec.relative is not None and gap <= _CONTEXT.multiply(spec.relative, _CONTEXT.abs(e))


def _label(spec: FieldSpec, actual: Any, expected: Any) -> bool:
    want = label_named(expected, spec.labels)
    return want is not None and label_named(actual, spec.labels) == want


def label_named(value: Any, labels: tuple[str, ...]) -> str | None:
    """The label a value names, as the ``label`` comparator reads it, or None."""
    if isinstance(value, bool) or _is_number(value):
        value = json.dumps(value)
    return first_word_label(value, labels) if isinstance(value, str) else None


def _text(value: Any, form: NormalForm | None) -> str:
    if not isinstance(value, str):
        value = json.dumps(value)
    return normal_text(value, form)


def _list(spec: FieldSpec, actual: Any, expected: Any) -> bool:
    if not isinstance(actual, list) or not isinstance(expected, list):
        return False
    if not all(_is_scalar(v) for v in actual) or not all(_is_scalar(v) for v in expected):
        return False
    a = [_item_key(v, spec.items) for v in actual]
    e = [_item_key(v, spec.items) for v in expected]
    return a == e if spec.ordered else set(a) == set(e)


def _item_key(value: Any, items: str) -> tuple:
    """A list item as the comparison sees it, hashable (a set compares these)."""
    if items == "text":
        return ("t", None if value is None else _text(value, None))
    if isinstance(value, bool):
        return ("b", value)
    if _is_number(value):
        number = to_decimal(value)
        return ("d", number.normalize(_CONTEXT) if number is not None else repr(value))
    return ("s", value)
