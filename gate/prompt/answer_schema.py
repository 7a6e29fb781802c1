"""Strict structured output: ``response_format: {type: json_schema, json_schema: {name,
schema, strict}}`` is checked when the file is read (``gate.prompt.json_schema.parse_schema_format``: a name, a
JSON Schema the gate can check, ``gate.prompt.json_schema``) and passed through as is;
every answer is then checked against the schema before its decision is read.

An answer that does not fit is a MISMATCH marked ``(schema)``, whatever the decision
would read from it: a label decision reads the marker itself as its answer; a fields
decision keeps what it read and the problem beside it (``{"(schema)": "amount: 'x' is
not of type 'number'", ...}``, ``schema_marked``), so the report shows the fields and
why. The figures count those answers apart (``gate.store.tool_calls.marked_counts``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .decision import MAX_ANSWER_CHARS, answer_json, strip_think
from .json_schema import answer_problem
from .structured.reading import parse_read
from .structured.rule import canonical

SCHEMA_MARK = "(schema)"


def response_schema(response_format: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The schema every answer of the prompt is checked against, or None."""
    if not response_format or response_format.get("type") != "json_schema":
        return None
    return (response_format.get("json_schema") or {}).get("schema")


def schema_problem(schema: Mapping[str, Any], raw_text: str) -> str | None:
    """Why the answer does not fit the schema, in one short line, or None."""
    found, data = answer_json(strip_think(raw_text[:MAX_ANSWER_CHARS]))
    if not found:
        return "not JSON"
    return answer_problem(schema, data)


def schema_marked(read: str, problem: str) -> str:
    """A fields decision's reading with the problem kept beside the fields."""
    return canonical({**(parse_read(read) or {}), SCHEMA_MARK: problem})


def schema_broken(actual: str | None) -> bool:
    """Whether an item's reading is marked as off the schema."""
    if not actual:
        return False
    if actual == SCHEMA_MARK:
        return True
    return actual.startswith('{"(schema)":') and SCHEMA_MARK in (parse_read(actual) or {})
