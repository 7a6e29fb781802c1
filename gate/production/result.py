"""What ``PromptRuntime.decide`` returns: the call's result (``gate.calls.llm.CallResult``)
and which version answered it, and whether the answer is one production may act on.

The gate scores every answer as its kind reads it, markers included (an answer off the
strict schema is a MISMATCH marked ``(schema)``, a tool call whose arguments failed is marked
too: ``gate.prompt.answer_schema``, ``gate.prompt.tool_decision``). Production gets none of
those markers: an answer that breaks the schema, names no label, is not a JSON object or
made a call that failed is ``valid=False`` with the reason typed on the result
(``invalid``: an ``Invalid``, its ``kind`` and the problem's message), and its ``decision``
is what was read without any marker: a fields decision's fields (canonical JSON, ``{}`` when
none), a label decision's ``(invalid)`` (``gate.verdict.scoring.INVALID_DECISION``). A valid
answer has ``invalid`` None."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from enum import StrEnum

from gate.calls.llm import CallResult
from gate.kinds import kind_of
from gate.prompt.answer_schema import SCHEMA_MARK, response_schema, schema_broken, schema_problem
from gate.prompt.spec import PromptSpec
from gate.prompt.structured.reading import NOT_AN_OBJECT, parse_read
from gate.prompt.structured.rule import canonical
from gate.prompt.tool_decision import LABEL_NOT_JSON, LABEL_OFF_SCHEMA, NOT_JSON, OFF_SCHEMA, PROBLEM_KEY
from gate.verdict.scoring import INVALID_DECISION

CALL_FIELDS = tuple(f.name for f in fields(CallResult))
SCHEMA_MARKED = ("label", "fields")  # the kinds that check the strict schema (their ``read``)


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


@dataclass(frozen=True)
class ServedResult(CallResult):
    prompt: str = ""
    version: int = 0  # the version that answered (during a canary rollout: the canary or the stable one)
    call_id: str = ""  # what feedback names this call by (``PromptRuntime.feedback``)
    rollout_id: int | None = None  # the canary rollout it was routed in (None: none in progress)
    arm: str | None = None  # "canary" or "stable" during a rollout
    invalid: Invalid | None = None  # why ``valid`` is False (None: a valid answer)


def served_result(
    result: CallResult,
    prompt: str,
    version: int,
    rollout_id: int | None = None,
    arm: str | None = None,
    spec: PromptSpec | None = None,
) -> ServedResult:
    """The result production gets; with ``spec`` (the version that answered) an invalid
    answer is told from a valid one (``answer_validity``)."""
    values = {name: getattr(result, name) for name in CALL_FIELDS}
    if spec is not None:
        decision, invalid = answer_validity(spec, result)
        values.update(decision=decision, valid=invalid is None)
    else:
        invalid = None
    return ServedResult(
        **values,
        prompt=prompt,
        version=version,
        call_id=new_call_id(),
        rollout_id=rollout_id,
        arm=arm,
        invalid=invalid,
    )


def answer_validity(spec: PromptSpec, result: CallResult) -> tuple[str, Invalid | None]:
    """The decision without the gate's markers and why the answer is invalid (None: it is
    valid), from what the answer's kind read (``result.decision``, ``result.valid``)."""
    decision, kind = result.decision, kind_of(spec.decision).name
    read = parse_read(decision) if spec.decision.fields is not None else None
    if kind in SCHEMA_MARKED and schema_broken(decision):
        if read is not None:
            message = str(read.pop(SCHEMA_MARK, ""))
            return canonical(read), Invalid(InvalidKind.SCHEMA, message)
        schema = response_schema(spec.response_format)
        problem = schema_problem(schema, result.raw_output) if schema is not None else None
        return INVALID_DECISION, Invalid(InvalidKind.SCHEMA, problem or "off the schema")
    if kind == "tool_call" and decision in (LABEL_NOT_JSON, LABEL_OFF_SCHEMA):
        return INVALID_DECISION, Invalid(InvalidKind.TOOL_CALL, NOT_JSON if decision == LABEL_NOT_JSON else OFF_SCHEMA)
    if kind == "tool_call" and read is not None and PROBLEM_KEY in read:
        problem = str(read.pop(PROBLEM_KEY))
        return canonical(read), Invalid(InvalidKind.TOOL_CALL, problem)
    if result.valid:
        return decision, None
    if decision == NOT_AN_OBJECT:
        return "{}", Invalid(InvalidKind.NOT_AN_OBJECT, "not a JSON object")
    return INVALID_DECISION, Invalid(InvalidKind.NO_LABEL, f"none of the labels {', '.join(spec.labels)}")


def new_call_id() -> str:
    return os.urandom(12).hex()
