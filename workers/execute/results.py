"""An item's result as the executor writes it back: from a call's answer, from answers
already paid for (``gate.prompt.request_keys``), from a failed call (retried with backoff, or final), and
from an item's trials (``gate.prompt.trials``); and the answers of a chunk worth keeping for reuse.

Trials and retries: an item's trials are called one after another in its call thread. A
trial whose call fails for good (not retryable, or at the attempt cap) is an ERROR trial,
which counts as not matching. A trial that fails retryably before the cap makes the whole
item PENDING again, retried with backoff as an item with one call is: the retry calls every
trial that is not kept for reuse, since a result is written only once, whole. That costs
calls on a flaky provider and keeps one rule: an item's trials are those of one attempt.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from functools import partial

from gate.errors import CallFailure, ModelCallError
from gate.kinds import Decision, kind_of
from gate.prompt.structured.reading import MAX_READ_CHARS, NOT_AN_OBJECT
from gate.prompt.trials import TrialRule, judge
from gate.records import Answer, ClaimedItem, ItemResult, Trial
from gate.states import Verdict
from gate.verdict.scoring import INVALID_DECISION

RAW_OUTPUT_LIMIT = 4000
ERROR_LIMIT = 1000
NOT_KEPT = (INVALID_DECISION, NOT_AN_OBJECT)  # answers not frozen for reuse: maybe a glitch


def judged(decision: Decision | None, actual: str, expected: str, item: dict | None = None) -> dict:
    """An answer's verdict against the item's expected decision: equal labels, or, for a
    fields decision, every field matching (with the masks of the wrong and missing ones; a
    tool call's: gate.prompt.tool_decision); an answer off the prompt's strict schema
    never matches (gate.prompt.answer_schema); the decision's kind scores it (gate.kinds)."""
    return kind_of(decision).score_item(decision, actual, expected, item)  # item: its columns (checks read them)


def called_result(
    item: ClaimedItem, out, key: str | None, decision: Decision | None = None, calls: int = 0
) -> ItemResult:
    """An item scored by the answer of its one call (``calls``: the model calls it took)."""
    actual = out.decision[:MAX_READ_CHARS]
    return ItemResult(
        item.position,
        actual_decision=actual,
        raw_output=out.output[:RAW_OUTPUT_LIMIT],
        latency_ms=out.latency_ms,
        prompt_tokens=out.prompt_tokens,
        completion_tokens=out.completion_tokens,
        answer_key=key,
        calls=calls,
        **judged(decision, actual, item.expected_decision, item.input),
    )


def reused_result(item: ClaimedItem, key: str, answer: Answer, decision: Decision | None = None) -> ItemResult:
    """An item scored by an answer already paid for: no call; the verdict is this item's."""
    return ItemResult(
        item.position,
        actual_decision=answer.actual_decision,
        raw_output=answer.raw_output,
        latency_ms=answer.latency_ms,
        prompt_tokens=answer.prompt_tokens,
        completion_tokens=answer.completion_tokens,
        answer_key=key,
        reused_update_id=answer.update_id,
        **judged(decision, answer.actual_decision, item.expected_decision, item.input),
    )


def reused_item(
    item: ClaimedItem, rule: TrialRule, keys: Sequence[str], known: dict[str, Answer], decision: Decision | None = None
) -> ItemResult:
    """An item whose every trial (or whose one call) was answered before: no call."""
    if len(keys) == 1:
        return reused_result(item, keys[0], known[keys[0]], decision)
    return trials_result(item, rule, [reused_trial(known[k], k) for k in keys], decision)


def failure_result(item: ClaimedItem, exc: ModelCallError, attempt_cap: int, settings) -> ItemResult:
    """A failed call: retried after a backoff (PENDING), or, not retryable or at the attempt
    cap, final (ERROR). A 429 with a Retry-After is the provider asking to wait: it spends
    no attempt (``backpressure``), within the item's time budget (``backpressure_result``)."""
    message = f"{exc.kind}: {exc}"[:ERROR_LIMIT]
    if exc.kind is CallFailure.RATE_LIMIT and exc.retry_after is not None and settings.backpressure_seconds > 0:
        return backpressure_result(item, exc, message, settings)
    if not exc.retryable or item.attempt >= attempt_cap:
        return ItemResult(item.position, Verdict.ERROR, error=message)
    return ItemResult(
        item.position,
        Verdict.PENDING,
        error=message,
        retry_in=item_retry_delay(item.attempt, exc.retry_after, settings),
    )


def backpressure_result(item: ClaimedItem, exc: ModelCallError, message: str, settings) -> ItemResult:
    """A 429 with a Retry-After: the item waits what the provider asked (spread by up to a
    quarter, so the items it asked at once do not come back as one), its attempts untouched,
    for as long as its budget allows (``PROMPTGATE_BACKPRESSURE_SECONDS``, counted from its
    first such 429: ``throttled_since``); then it ends ERROR, saying so."""
    waited = item.throttled_for or 0.0
    if waited >= settings.backpressure_seconds:
        return ItemResult(
            item.position,
            Verdict.ERROR,
            error=(
                f"{CallFailure.RATE_LIMIT}: the provider kept asking to wait (HTTP 429 with Retry-After) for "
                f"{waited:.0f} s, past the item's backpressure budget of {settings.backpressure_seconds:g} s "
                "(PROMPTGATE_BACKPRESSURE_SECONDS)"
            )[:ERROR_LIMIT],
        )
    assert exc.retry_after is not None  # failure_result's condition: a 429 that said how long
    delay = exc.retry_after * random.uniform(1.0, 1.25) + random.uniform(0.0, 0.05)
    return ItemResult(item.position, Verdict.PENDING, error=message, retry_in=delay, backpressure=True)


def item_retry_delay(attempt: int, retry_after: float | None, settings) -> float:
    """Seconds until a failed item is visible again after its ``attempt``: exponential
    backoff, drawn from the upper half of the step (equal jitter: items that failed
    together spread out, and none comes back at once), never sooner than the provider asked."""
    ceiling = min(settings.backoff_max, settings.backoff_base * 2 ** (attempt - 1))
    delay = random.uniform(ceiling / 2, ceiling)
    return max(delay, retry_after or 0.0)


# --- trials --------------------------------------------------------------------------------


def answered_trial(out, key: str) -> Trial:
    return Trial(
        out.decision[:MAX_READ_CHARS],
        out.output[:RAW_OUTPUT_LIMIT],
        out.latency_ms,
        out.prompt_tokens,
        out.completion_tokens,
        key=key,
    )


def reused_trial(answer: Answer, key: str) -> Trial:
    return Trial(
        answer.actual_decision,
        answer.raw_output,
        answer.latency_ms,
        answer.prompt_tokens,
        answer.completion_tokens,
        key=key,
        reused_update_id=answer.update_id,
    )


def failed_trial(failure: ItemResult, key: str) -> Trial:
    return Trial(None, error=failure.error, key=key)


def trials_result(
    item: ClaimedItem, rule: TrialRule, trials: Sequence[Trial], decision: Decision | None = None
) -> ItemResult:
    """An item scored by its trials under the prompt's rule: its verdict and decision
    (``gate.prompt.trials.judge``), an output behind that decision, the tokens of every trial,
    the latency of its slowest call (latency is a per-call figure: reports read it from
    the trials), trial 1's key (retention keeps the others with it); reused only when no
    trial was called."""
    match = kind_of(decision).matcher(decision)
    matches = None if match is None else (lambda d: match(d, item.expected_decision))
    outcome = judge(trials, item.expected_decision, rule, matches)
    answered = [t for t in trials if t.error is None]
    shown = next((t for t in answered if t.decision == outcome.decision), answered[0] if answered else None)
    reused = [t.reused_update_id for t in trials]
    result = partial(
        ItemResult,
        answer_key=trials[0].key,
        trials=tuple(trials),
        unstable=outcome.unstable,
        reused_update_id=reused[0] if None not in reused else None,
    )
    if outcome.verdict == Verdict.ERROR:
        return result(item.position, Verdict.ERROR, error=(outcome.error or "")[:ERROR_LIMIT])
    assert outcome.decision is not None  # an Outcome's decision is None for ERROR only
    fields = judged(decision, outcome.decision, item.expected_decision, item.input)
    fields.pop("verdict")  # the rule's verdict stands; the masks are those of its decision
    return result(
        item.position,
        outcome.verdict,
        actual_decision=outcome.decision[:MAX_READ_CHARS],
        **fields,
        raw_output=(shown.raw_output or "")[:RAW_OUTPUT_LIMIT] if shown else None,
        latency_ms=max((t.latency_ms for t in answered if t.latency_ms is not None), default=None),
        prompt_tokens=token_total(t.prompt_tokens for t in answered),
        completion_tokens=token_total(t.completion_tokens for t in answered),
    )


def token_total(counts: Iterable[int | None]) -> int | None:
    """A sum of token counts; None when one is missing (no cost can be had)."""
    known = list(counts)
    counted = [c for c in known if c is not None]
    return None if len(counted) < len(known) else sum(counted)


# --- answers kept for reuse ------------------------------------------------------------------


def new_answers(results: list[ItemResult], update_id: int, run_id: int) -> list[Answer]:
    """The chunk's answers worth keeping: called now (not reused), of a final MATCH or
    MISMATCH, and one of the labels (an answer outside them may be a glitch: empty, cut
    off, filtered; it is not frozen for every later run). An item with trials keeps each
    trial's so, under its own key."""
    kept = []
    for r in results:
        if r.verdict not in (Verdict.MATCH, Verdict.MISMATCH) or r.judging is not None:  # judged: its own answers
            continue
        if r.trials is not None:
            kept += [
                Answer(
                    t.key,
                    t.decision,
                    t.raw_output,
                    t.latency_ms,
                    t.prompt_tokens,
                    t.completion_tokens,
                    update_id,
                    run_id,
                    trial_of=None if n == 0 else r.answer_key,
                )
                for n, t in enumerate(r.trials)
                if t.key
                and t.error is None
                and t.decision is not None  # (an answered trial has one)
                and t.reused_update_id is None
                and t.decision not in NOT_KEPT
            ]
        elif (
            r.answer_key
            and r.reused_update_id is None
            and r.actual_decision is not None  # (a MATCH or MISMATCH has one)
            and r.actual_decision not in NOT_KEPT
        ):
            kept.append(
                Answer(
                    r.answer_key,
                    r.actual_decision,
                    r.raw_output,
                    r.latency_ms,
                    r.prompt_tokens,
                    r.completion_tokens,
                    update_id,
                    run_id,
                )
            )
    return kept


# --- the tally's rows --------------------------------------------------------------------------


def tally_outcomes(
    results: Sequence[ItemResult], items: Sequence[ClaimedItem]
) -> list[tuple[int, str, str, str | None]]:
    """What a write-back adds to its run's tally (``store.stops.add_tally``'s ``outcomes``):
    (position, verdict, expected label, answer) of each result that is final (MATCH,
    MISMATCH, ERROR), the label from its claimed item: what the items just written hold."""
    final = {r.position: r for r in results if r.verdict != Verdict.PENDING}
    return [
        (i.position, r.verdict, i.expected_decision, r.actual_decision)
        for i in items
        if (r := final.get(i.position)) is not None
    ]
