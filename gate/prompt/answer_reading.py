"""An answer's decision, whatever the prompt decides by: one label (``gate.prompt.decision``),
a judged answer's bounded text (``gate.prompt.judge``), fields
(``gate.prompt.structured.reading``), the tool call (``gate.prompt.tool_decision``), each
after the strict schema's check (``gate.prompt.answer_schema``). The call path
(``gate.calls.llm``) reads every answer here, the executor's and production's alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .answer_schema import SCHEMA_MARK, response_schema, schema_marked, schema_problem
from .decision import parse_decision
from .judge import bounded_answer
from .spec import PromptSpec
from .structured.reading import NOT_AN_OBJECT, read_answer
from .tool_decision import ToolCall, call_label, call_reading, read_calls


@dataclass(frozen=True)
class Reading:
    decision: str | None  # a label, a reading field by field (canonical JSON), a marker; None: no label
    valid: bool  # False: no label could be read (None, NOT_AN_OBJECT)
    calls: tuple[ToolCall, ...] = ()  # the tool calls the answer made


def read_reply(spec: PromptSpec, text: str, message: Mapping[str, Any]) -> Reading:
    """The decision of one answer: ``text`` (its content, made storable) and ``message``
    (the whole assistant message, for its tool calls)."""
    calls, too_many = read_calls(message, spec.tools) if spec.tools else ((), False)
    if spec.decision.judge is not None:  # a generative answer: its text, as a judge will read it
        return Reading(bounded_answer(text), True, calls)
    if spec.decision.type == "tool_call":
        if spec.decision.fields is not None:
            return Reading(call_reading(spec.decision.fields, calls, too_many), True, calls)
        label = call_label(calls, spec.labels, too_many)
        return Reading(label, label is not None, calls)
    schema = response_schema(spec.response_format)
    problem = schema_problem(schema, text) if schema is not None else None
    if spec.decision.fields is not None:
        read = read_answer(spec.decision.fields, text)
        if problem is not None:
            return Reading(schema_marked(read if read != NOT_AN_OBJECT else "{}", problem), True, calls)
        return Reading(read, read != NOT_AN_OBJECT, calls)
    if problem is not None:
        return Reading(SCHEMA_MARK, True, calls)
    label = parse_decision(spec, spec.labels, text)
    return Reading(label, label is not None, calls)
