"""An answer's decision, whatever the prompt decides by, as its kind reads it (``gate.kinds``):
one label (``gate.prompt.decision``), a judged answer's bounded text (``gate.prompt.judge``),
fields (``gate.prompt.structured.reading``), the tool call (``gate.prompt.tool_decision``), each
after the strict schema's check (``gate.prompt.answer_schema``). The call path
(``gate.calls.llm``) reads every answer here, the executor's and production's alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.kinds import Reading, kind_of

from .spec import PromptSpec
from .tool_decision import read_calls

__all__ = ["Reading", "read_reply"]


def read_reply(spec: PromptSpec, text: str, message: Mapping[str, Any]) -> Reading:
    """The decision of one answer: ``text`` (its content, made storable) and ``message``
    (the whole assistant message, for its tool calls), read by the decision's kind."""
    calls, too_many = read_calls(message, spec.tools) if spec.tools else ((), False)
    return kind_of(spec.decision).read(spec, text, calls, too_many)
