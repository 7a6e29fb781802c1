"""The wrong fields of an item a report lists (a failing or a broken item of a fields
decision): which fields, what was expected and what was read (None: missing); first, an
answer's problem with the prompt's strict schema, as a marker entry (``(schema)``)."""

from __future__ import annotations

from typing import Any

from gate.prompt.answer_schema import SCHEMA_MARK

from .compare import field_matches
from .reading import parse_read
from .rule import FieldsRule


def wrong_fields(rule: FieldsRule, actual: str | None, expected: str) -> list[dict[str, Any]]:
    read, wanted = parse_read(actual), parse_read(expected) or {}
    out = []
    if read is not None and SCHEMA_MARK in read:
        out.append({"field": SCHEMA_MARK, "expected": None, "actual": read[SCHEMA_MARK], "missing": False})
    for spec in rule.fields:
        want = wanted.get(spec.name)
        if read is None or spec.name not in read:
            out.append({"field": spec.name, "expected": want, "actual": None, "missing": True})
        elif spec.name not in wanted or not field_matches(spec, read[spec.name], want):
            out.append({"field": spec.name, "expected": want, "actual": read[spec.name], "missing": False})
    return out
