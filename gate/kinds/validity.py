"""Whether an answer is one production may act on (``gate.production.result``): the reason
an answer is not, typed, as each kind's ``served`` tells it from its own reading. The gate's
scoring reads the same answers with its marks (``(schema)``, ``(arguments)``); production
gets the reason here and a decision without them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class InvalidKind(StrEnum):
    """Why an answer is not one production may act on."""

    SCHEMA = "schema"  # off the prompt's strict schema (``response_format: json_schema``)
    NO_LABEL = "no_label"  # a label decision (or a tool call's by label) read none of the labels
    NOT_AN_OBJECT = "not_an_object"  # a fields decision's answer is not a JSON object
    TOOL_CALL = "tool_call"  # a call's arguments not JSON or off the function's schema, or too many calls


@dataclass(frozen=True)
class Invalid:
    kind: InvalidKind
    message: str  # the problem in one line: the schema's message, "not JSON", "off schema", ...

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.message}"
