"""Calling one item, in a call thread of the executor (``workers.execute.executor``): the call
under the shared rate limit (``gate.ratelimit``), or, for a prompt with trials, one call
per trial (``gate.prompt.trials``), each answer kept from before standing in for its call; and
what a failed call makes of the item (see ``workers.execute.results``)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any

from gate.calls.providers import Endpoint
from gate.errors import CallFailure, ModelCallError
from gate.prompt.spec import PromptSpec
from gate.records import Answer, ClaimedItem, ItemResult
from gate.states import Verdict

from . import metrics
from .early_stop import RunContext
from .results import answered_trial, called_result, failed_trial, failure_result, reused_trial, trials_result


@dataclass(frozen=True)
class CallTarget:
    """A prompt a run calls besides its candidate (a judge, the live version compared
    with): where its calls go, its price (for spend caps), its role (for the metrics)."""

    spec: PromptSpec
    endpoint: Endpoint
    price: dict | None = None
    role: str = "candidate"


@dataclass
class RunCall:
    """What every call of one run shares: the candidate, where its calls go (or why they
    cannot go anywhere), its update and dataset version, whether answers already paid for
    may stand in for calls, and, once its template overran its budget, why the rest is not
    rendered."""

    spec: PromptSpec
    endpoint: Endpoint | None
    endpoint_error: str | None = None
    over_budget: str | None = None
    update_id: int = 0
    version_id: int | None = None
    reuse: bool = True
    rendered: int = 0  # items rendered in the sandbox, and the seconds it took
    render_seconds: float = 0.0
    context: RunContext = field(default_factory=RunContext)  # its bars and tally to judge, its update's caps
    stopped: bool = False  # its update stopped: no call of it begins any more
    judging: Any = None  # a judged run: its judge, sentinels, live version (workers.execute.judging.Judging)

    def __post_init__(self) -> None:
        self.stopped = self.stopped or self.context.stopped


class ItemCaller:
    """Scores items by calling the model: ``call`` (gate.calls.llm.call_prompt or a stand-in)
    through ``limiter``; counts calls and retries in the executor's ``stats`` (under
    ``lock``) and the start of each trial's call in its ``ledger`` (workers.execute.ledger), whose
    ``draining`` says the worker is draining (no further trial begins: the item goes back
    for another worker); ``stop_run(run, item)`` is how a template over its budget stops
    its run; ``spend`` (workers.execute.spend.SpendGuard) reserves each call of an update with a
    spend cap."""

    def __init__(self, call, settings, limiter, ledger, stats: dict, lock: threading.Lock, stop_run, spend=None):
        self.call = call
        self.settings = settings
        self.limiter = limiter
        self.ledger = ledger
        self.stats = stats
        self.lock = lock
        self.stop_run = stop_run
        self.spend = spend

    def result(
        self, run: RunCall, item: ClaimedItem, messages, keys: tuple[str, ...] | None, known: dict[str, Answer]
    ) -> ItemResult:
        """One item: its messages (rendered by a render thread), the call under the rate
        limit (or its trials), its verdict; each answer is kept under its key for reuse. The
        result says how many model calls it took (``calls``)."""
        made: list[int] = []
        result = self._result(run, item, messages, keys, known, made)
        return replace(result, calls=len(made)) if len(made) != result.calls else result

    def _result(
        self,
        run: RunCall,
        item: ClaimedItem,
        messages,
        keys: tuple[str, ...] | None,
        known: dict[str, Answer],
        made: list[int],
    ) -> ItemResult:
        if run.stopped:  # its update stopped since the item was claimed: the item is STOPPED already
            return ItemResult(item.position, Verdict.PENDING, retry_in=0.0, error="not called: its update stopped")
        if run.over_budget or run.endpoint is None:
            why = f"budget: {run.over_budget}" if run.over_budget else f"config: {run.endpoint_error}"
            return ItemResult(item.position, Verdict.ERROR, error=why[:1000])
        if isinstance(messages, ModelCallError):
            if messages.kind is CallFailure.BUDGET and not run.over_budget:
                self.stop_run(run, item)
            return self.failure(item, messages)
        if run.spec.trials > 1:
            assert keys is not None  # rendered messages come with their trial keys (Executor._prepare)
            return self._trials(run, item, messages, keys, known, made)
        if run.judging is not None:  # its answer graded by a judge (workers.execute.judging)
            return run.judging.result(self, run, item, messages, keys, known, made)
        out = self._call(run, item, messages, made)
        return (
            out
            if isinstance(out, ItemResult)
            else called_result(item, out, keys[0] if keys else None, run.spec.decision, len(made))
        )

    def _trials(
        self,
        run: RunCall,
        item: ClaimedItem,
        messages,
        keys: tuple[str, ...],
        known: dict[str, Answer],
        made: list[int],
    ) -> ItemResult:
        """Each trial in turn: its answer kept from before, or a call. A trial that failed
        retryably makes the item PENDING at once (see workers/execute/results.py)."""
        trials = []
        for n, key in enumerate(keys):
            if key in known:
                trials.append(reused_trial(known[key], key))
                continue
            if n and self.ledger.draining:  # the item goes back whole, for another worker
                return ItemResult(
                    item.position,
                    Verdict.PENDING,
                    retry_in=0.0,
                    error="not called: the worker stopped between two trials",
                )
            if n:  # the age of the call in flight, not of the item's first
                self.ledger.trial_began(item)
            out = self._call(run, item, messages, made)
            if isinstance(out, ItemResult) and out.verdict == Verdict.PENDING:
                return out
            trials.append(failed_trial(out, key) if isinstance(out, ItemResult) else answered_trial(out, key))
        return trials_result(item, run.spec.rule, trials, run.spec.decision)

    def _call(self, run: RunCall, item: ClaimedItem, messages, made: list[int], target: CallTarget | None = None):
        """One model call under the rate limit and its update's spend cap: its answer, or
        the result that stands for it (a failure, final or to retry; PENDING when the worker
        stopped while it waited, or when the cap stopped its update). ``target``: a prompt
        other than the candidate (a judge's call), on its provider, at its price."""
        with self.lock:
            self.stats["calls"] += 1
        spec, endpoint = (target.spec, target.endpoint) if target else (run.spec, run.endpoint)
        assert endpoint is not None  # a run without one ends before any call (_result)
        price = target.price if target else None
        with self.limiter.slot(spec, item, messages, endpoint.base_url) as slot:
            if not slot.granted:  # the worker stopped while this call waited for its budget
                return ItemResult(
                    item.position,
                    Verdict.PENDING,
                    retry_in=0.0,
                    error="not called: the worker stopped while waiting for the rate limit",
                )
            if not self.spend:
                reserved = 0
            else:  # a judge's call at the judge's price
                reserved = (
                    self.spend.reserve(run, item, messages, spec, price)
                    if target
                    else self.spend.reserve(run, item, messages)
                )
            if reserved is None or run.stopped:  # its update reached a cap, or stopped meanwhile
                if reserved is not None and self.spend:
                    self.spend.release(run, reserved)  # granted, but no call follows it
                return ItemResult(item.position, Verdict.PENDING, retry_in=0.0, error="not called: its update stopped")
            metrics.count_wait(slot.waited)
            metrics.count_role(target.role if target else "candidate")
            made.append(1)
            out = None
            try:
                out = metrics.timed_call(
                    self.call, spec, item.input, settings=self.settings, messages=messages, endpoint=endpoint
                )
                return out
            except ModelCallError as exc:
                slot.failed(exc)  # a 429 pauses the shared limit and halves the concurrency
                return self.failure(item, exc)
            finally:
                if reserved:
                    self.spend.settle(run, reserved, out, price)

    def failure(self, item: ClaimedItem, exc: ModelCallError) -> ItemResult:
        result = failure_result(item, exc, self.settings.attempt_cap, self.settings)
        if result.verdict == Verdict.PENDING:
            self.stats["retries"] += 1
        return result
