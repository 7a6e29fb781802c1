"""The wrong fields of an item a report lists (a failing or a broken item of a fields
decision): which fields, what was expected and what was read (None: missing)."""

from __future__ import annotations

from typing import Any

from .compare import field_matches
from .reading import parse_read
from .rule import FieldsRule


def wrong_fields(rule: FieldsRule, actual: str | None, expected: str) -> list[dict[str, Any]]:
    read, wanted = parse_read(actual), parse_read(expected) or {}
    out = []
    for spec in rule.fields:
        want = wanted.get(spec.name)
        if read is None or spec.name not in read:
            out.append({"field": spec.name, "expected": want, "actual": None, "missing": True})
        elif spec.name not in wanted or not field_matches(spec, read[spec.name], want):
            out.append({"field": spec.name, "expected": want, "actual": read[spec.name], "missing": False})
    return out
