"""What ``PromptRuntime.decide`` returns: the call's result (``gate.calls.llm.CallResult``)
and which version answered it."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

from gate.calls.llm import CallResult

CALL_FIELDS = tuple(f.name for f in fields(CallResult))


@dataclass(frozen=True)
class ServedResult(CallResult):
    prompt: str = ""
    version: int = 0  # the version that answered (during a canary rollout: the canary or the stable one)
    call_id: str = ""  # what feedback names this call by (``PromptRuntime.feedback``)
    rollout_id: int | None = None  # the canary rollout it was routed in (None: none in progress)
    arm: str | None = None  # "canary" or "stable" during a rollout


def served_result(
    result: CallResult, prompt: str, version: int, rollout_id: int | None = None, arm: str | None = None
) -> ServedResult:
    values = {name: getattr(result, name) for name in CALL_FIELDS}
    return ServedResult(**values, prompt=prompt, version=version, call_id=new_call_id(), rollout_id=rollout_id, arm=arm)


def new_call_id() -> str:
    return os.urandom(12).hex()
