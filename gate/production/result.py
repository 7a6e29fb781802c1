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

from gate.calls.llm import CallResult
from gate.kinds import Reading, kind_of
from gate.kinds.validity import Invalid, InvalidKind
from gate.prompt.spec import PromptSpec

CALL_FIELDS = tuple(f.name for f in fields(CallResult))

__all__ = ["Invalid", "InvalidKind", "ServedResult", "answer_validity", "served_result"]


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
    call_id: str | None = None,
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
        call_id=call_id or new_call_id(),
        rollout_id=rollout_id,
        arm=arm,
        invalid=invalid,
    )


def answer_validity(spec: PromptSpec, result: CallResult) -> tuple[str, Invalid | None]:
    """The decision without the gate's markers and why the answer is invalid (None: it is
    valid), as the answer's kind tells it from what it read (``DecisionKind.served``)."""
    reading = Reading(result.decision, result.valid, result.tool_calls)
    return kind_of(spec.decision).served(spec, reading, result.raw_output)


def new_call_id() -> str:
    return os.urandom(12).hex()
