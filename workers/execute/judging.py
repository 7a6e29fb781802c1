"""A judged run's items, in the executor's call threads: the candidate's answer (called,
or kept from before), then its judge's verdict, through the same call path as every call
(``ItemCaller._call``: the shared rate limit, the update's spend caps, the metrics, by
role), one after the other in the item's own thread, so a run's candidate and judge calls
are pipelined item by item rather than chunk by chunk.

* **Graded** (``pass``): the judge's templates render over the item with ``answer`` = the
  candidate's answer, a bounded string variable (gate/prompt/judge.py); ``judge_trials``
  calls, the majority's label; MATCH when it is a pass label, MISMATCH otherwise (no
  majority or an invalid answer: MISMATCH, ``(invalid)``).
* **Compared with live** (``compare: live``): live's answer on the same item (kept from
  before, as its own run answered it, or called on its pinned provider), then the judge
  twice, positions swapped (``answer_a``/``answer_b``); a win or a loss only when both
  orders agree, else a tie — ``inconsistent`` when they disagree (the judge's position
  bias). MISMATCH only for a loss.
* **Sentinels**: the judge on its own human-labelled items riding on this item
  (``store.sentinels``), called afresh every time (an answer kept from before would hide a
  drift), MATCH when it agrees with the humans; written back with the item.

Every answer obtained here is kept for reuse under its request's key (the candidate's, the
judge's — its request holds the answer it read — and live's), as the item's own would be.
A retryable failure of any call makes the item PENDING again; the answers already had are
kept, so the retry calls only what failed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from gate.calls.llm import render_messages
from gate.calls.providers import ProviderDecl, endpoint_for
from gate.db import read
from gate.errors import ModelCallError, UsageError, first_line
from gate.kinds import kind_of
from gate.prompt.decision import label_key
from gate.prompt.judge import answer_variables, answers_read, majority
from gate.prompt.request_keys import request_key, trial_keys
from gate.prompt.spec import PromptSpec, parse_spec
from gate.records import Answer, ClaimedItem, ItemResult, Sentinel, SentinelResult
from gate.records.pinned import Pinned, PinnedJudge, PinnedLive
from gate.states import Verdict
from gate.store.judges import version_record
from gate.store.runs import get_run
from gate.store.sentinels import run_sentinels, sentinel_outcomes, write_sentinel_results
from gate.verdict.judge_stats import drift
from gate.verdict.scoring import INVALID_DECISION
from gate.verdict.update_outcome import JUDGE_DRIFT, WITH_UPDATE

from .calls import CallTarget
from .results import RAW_OUTPUT_LIMIT, token_total

log = logging.getLogger("promptgate.execute")
SAID_LIMIT = 1000  # characters of a judge's (or live's) answer kept with the item for the report
NO_LIVE = "(no live version)"
CANDIDATE, LIVE, TIE = "candidate", "live", "tie"
CHECK_FAILED = "(failed a check)"  # a judged item's decision when a check before the judge failed


@dataclass(frozen=True)
class Answered:
    """One answer had for an item: its text (a label for a judge), where it came from."""

    text: str | None
    raw: str | None
    latency_ms: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    key: str | None = None
    reused_update_id: int | None = None
    called: bool = False

    @classmethod
    def of(cls, out, key: str | None) -> Answered:
        """A call's answer (an answer outside the judge's labels: no text, no label)."""
        return cls(
            out.decision if out.valid else None,
            out.raw_output,
            out.latency_ms,
            out.prompt_tokens,
            out.completion_tokens,
            key,
            called=True,
        )

    @classmethod
    def kept(cls, answer: Answer, key: str) -> Answered:
        return cls(
            answer.actual_decision,
            answer.raw_output,
            answer.latency_ms,
            answer.prompt_tokens,
            answer.completion_tokens,
            key,
            answer.update_id,
        )


@dataclass
class Judged:
    """What an item's write-back keeps besides its row: the answers obtained (for reuse)
    and its sentinels' verdicts."""

    answers: list[tuple[Answered, str | None]] = field(default_factory=list)  # (answer, trial 1's key for trials 2..)
    sentinels: list[SentinelResult] = field(default_factory=list)


class Failed(Exception):
    """A call of an item's judging failed: ``result`` stands for the item (final or PENDING)."""

    def __init__(self, result: ItemResult):
        super().__init__(result.error)
        self.result = result


@dataclass
class Judging:
    """What every judged call of one run shares: the judge, the live version a comparison
    reads, the sentinels by the item they ride on."""

    pinned: PinnedJudge
    judge: CallTarget | None
    live: CallTarget | None
    sentinels: dict[int, list[Sentinel]]
    renderer: Any
    answers_of: Callable[[list[str]], dict[str, Answer]]
    reuse: bool = True
    error: str | None = None  # why no judging call can be made here (a provider's key unset)

    @classmethod
    def load(cls, conn, spec: PromptSpec, pinned: Pinned, run_id: int, renderer, answers_of, reuse: bool):
        """The run's judging, from what its submission pinned; None for a run not judged."""
        judged = pinned.judge
        if not judged:
            return None
        by_ride: dict[int, list[Sentinel]] = {}
        for sentinel in run_sentinels(conn, run_id):
            by_ride.setdefault(sentinel.ride_position, []).append(sentinel)
        made = cls(judged, None, None, by_ride, renderer, answers_of, reuse)
        try:
            made.judge = _target(conn, judged.name, judged, "judge")
            if judged.live:
                made.live = _target(conn, spec.name, judged.live, "live")
        except UsageError as exc:  # the key variable a provider names is not set in this process
            made.error = f"config: {exc}"[:1000]
        return made

    def result(self, caller, run, item: ClaimedItem, messages, keys, known: dict, made: list[int]) -> ItemResult:
        judged = Judged()
        try:
            if self.error:
                raise Failed(ItemResult(item.position, Verdict.ERROR, error=self.error))
            candidate = self._candidate(caller, run, item, messages, keys, known, made, judged)
            rule = run.spec.decision.checks if not self.pinned.compare else None
            failing = rule.failed(candidate.text, item.input) if rule is not None else None
            outcome = self._compare(caller, run, item, candidate, made, judged) if self.pinned.compare else None
            if failing:  # a check failed: a MISMATCH, the judge not called (gate.prompt.checks)
                names = rule.failed_names(failing) if rule is not None else []
                outcome = (
                    Verdict.MISMATCH,
                    CHECK_FAILED,
                    {"checks_failed": names, "judge_calls": 0, "judge_answers": 0},
                )
            elif outcome is None:
                outcome = self._grade(caller, run, item, candidate, made, judged)
            judged.sentinels = self._sentinels(caller, run, item, made)
        except Failed as failed:
            if failed.result.verdict == Verdict.ERROR and not self.error:  # final: its sentinels are judged still
                try:
                    judged.sentinels = self._sentinels(caller, run, item, made)
                except Failed:  # a sentinel that could not be called now stays unjudged
                    pass
            return replace(failed.result, judging=judged, calls=len(made))
        verdict, actual, shown = outcome
        return ItemResult(
            item.position,
            verdict,
            actual_decision=actual,
            raw_output=(candidate.raw or "")[:RAW_OUTPUT_LIMIT],
            latency_ms=candidate.latency_ms,
            prompt_tokens=candidate.prompt_tokens,
            completion_tokens=candidate.completion_tokens,
            answer_key=candidate.key,
            reused_update_id=candidate.reused_update_id,
            calls=len(made),
            judge=shown,
            judging=judged,
            fields_wrong=failing,
            fields_missing=None if failing is None else 0,
        )

    # --- the answers ----------------------------------------------------------------------

    def _candidate(self, caller, run, item, messages, keys, known, made, judged) -> Answered:
        key = keys[0] if keys else None
        if key is not None and key in known:
            return Answered.kept(known[key], key)
        out = caller._call(run, item, messages, made)
        if isinstance(out, ItemResult):
            raise Failed(out)
        answer = Answered.of(out, key)
        judged.answers.append((answer, None))
        return answer

    def _live(self, caller, run, item, made, judged) -> Answered:
        """Live's answer on the item: kept from before under its request's key (its own run
        answered it), else called on its pinned provider."""
        live = self.live
        assert live is not None  # _compare asks only when there is a live version
        messages = self._render(live.spec, item.input, None, item)
        key = request_key(live.spec, messages, live.endpoint.base_url)
        found = self.answers_of([key]) if self.reuse else {}
        if key in found:
            answer = Answered.kept(found[key], key)
        else:
            out = caller._call(run, item, messages, made, live)
            if isinstance(out, ItemResult):
                raise Failed(replace(out, error=f"live version: {out.error}"[:1000]))
            answer = Answered.of(out, key)
            judged.answers.append((answer, None))
        text = kind_of(live.spec.decision).judge_reads(answer.text, answer.raw)
        return replace(answer, text=text)

    def _verdict(
        self, caller, run, item, rendered_for, variables, made, judged, fresh=False
    ) -> tuple[str | None, list]:
        """The judge's label on one rendering (its trials' majority, None without one) and
        the answers it stands on."""
        judge = self._judge()
        spec = judge.spec
        messages = self._render(spec, rendered_for, variables, item)
        keys = trial_keys(replace(spec, trials=self.pinned.trials), messages, judge.endpoint.base_url)
        found = {} if fresh or not self.reuse else self.answers_of(list(keys))
        answers = []
        for n, key in enumerate(keys):
            if key in found:
                answers.append(Answered.kept(found[key], key))
                continue
            target = judge if not fresh else replace(judge, role="sentinel")
            out = caller._call(run, item, messages, made, target)
            if isinstance(out, ItemResult):
                raise Failed(replace(out, error=f"judge: {out.error}"[:1000]))
            answer = Answered.of(out, key)
            answers.append(answer)
            if not fresh:
                judged.answers.append((answer, keys[0] if n else None))
        return majority([a.text for a in answers]), answers

    def _judge(self) -> CallTarget:
        """The judge's call target: load sets it, or says in ``error`` why not (and then no
        judging call is made)."""
        assert self.judge is not None, self.error
        return self.judge

    def _render(self, spec: PromptSpec, row, variables, item):
        try:
            return render_messages(spec, row or {}, self.renderer, variables=variables)
        except ModelCallError as exc:
            who = "judge" if spec is self._judge().spec else "live version"
            raise Failed(ItemResult(item.position, Verdict.ERROR, error=f"{exc.kind}: {who}: {exc}"[:1000])) from None

    # --- the verdicts -----------------------------------------------------------------------

    def _grade(self, caller, run, item, candidate: Answered, made, judged) -> tuple[str, str, dict]:
        label, answers = self._verdict(caller, run, item, item.input, {"answer": candidate.text or ""}, made, judged)
        passing = {label_key(p) for p in self.pinned.passing or ()}
        verdict = Verdict.MATCH if label is not None and label_key(label) in passing else Verdict.MISMATCH
        shown: dict[str, Any] = {"label": label, "said": _said(answers), **_role_figures("judge", answers)}
        if len(answers) > 1:
            shown["trials"] = [a.text for a in answers]
        return verdict, label if label is not None else INVALID_DECISION, shown

    def _compare(self, caller, run, item, candidate: Answered, made, judged) -> tuple[str, str, dict]:
        if self.live is None:  # no live version: nothing to compare with (the bars say n/a)
            return Verdict.MATCH, NO_LIVE, {"outcome": NO_LIVE}
        live = self._live(caller, run, item, made, judged)
        orders: list[dict[str, Any]] = []
        used: list[Answered] = []
        for first, a, b in ((LIVE, live, candidate), (CANDIDATE, candidate, live)):
            variables = {"answer_a": a.text or "", "answer_b": b.text or ""}
            label, answers = self._verdict(caller, run, item, item.input, variables, made, judged)
            better = {"a": first, "b": CANDIDATE if first == LIVE else LIVE}.get(label_key(label or ""), TIE)
            orders.append({"a": first, "label": label, "better": better, "said": _said(answers)})
            used += answers
        outcome = _outcome(orders[0]["better"], orders[1]["better"])
        shown: dict[str, Any] = {"orders": orders, "outcome": outcome, "live_answer": (live.text or "")[:SAID_LIMIT]}
        shown.update(_role_figures("judge", used), **_role_figures("live", [live]))
        return (Verdict.MISMATCH if outcome == "loss" else Verdict.MATCH), outcome, shown

    def _sentinels(self, caller, run, item, made) -> list[SentinelResult]:
        """The judge on the sentinels riding on this item, afresh; an answer it failed to give
        for good counts against it (a retryable failure retries the item, sentinels too)."""
        out = []
        names = answers_read(self._judge().spec)
        for sentinel in self.sentinels.get(item.position, ()):
            calls = len(made)
            variables = answer_variables(names, sentinel.input)
            try:
                label, answers = self._verdict(caller, run, item, sentinel.input, variables, made, None, fresh=True)
            except Failed as failed:
                if failed.result.verdict == Verdict.PENDING:
                    raise
                out.append(SentinelResult(sentinel.number, Verdict.ERROR, None, failed.result.error, len(made) - calls))
                continue
            agreed = label is not None and label_key(label) == label_key(sentinel.expected_decision)
            figures = _role_figures("judge", answers)
            out.append(
                SentinelResult(
                    sentinel.number,
                    Verdict.MATCH if agreed else Verdict.MISMATCH,
                    label if label is not None else INVALID_DECISION,
                    _said(answers),
                    len(made) - calls,
                    figures["judge_in"],
                    figures["judge_out"],
                )
            )
        return out


def load_judging(conn, run_id: int, spec: PromptSpec, renderer, answers_of, reuse: bool) -> Judging | None:
    """A run's judging as its submission pinned it (None: a run not judged): a judged
    candidate's, or a baseline run grading live's answers for one (its judge pinned with it,
    ``gate.domain.judging.graded_live``)."""
    run = get_run(conn, run_id)
    return Judging.load(conn, spec, run.pinned, run_id, renderer, answers_of, reuse)


def watch_sentinels(engine, stopper, run, run_id: int, results: list[ItemResult]) -> None:
    """After a write-back that committed sentinel verdicts: once the drift test over the
    sentinels so far, in judge-call order, alarms (final: no sentinel to come can undo it),
    the run's update stops (its judge drifted: finalize ends the run ERROR, reconcile the
    update FAILED) — the rest of its items are not judged by a judge that no longer agrees
    with the humans."""
    if run is None or run.judging is None or run.stopped or not any(r.judging and r.judging.sentinels for r in results):
        return
    try:
        pinned = run.judging.pinned.agreement  # a record (was read as a dict: every look failed)
        if not pinned:
            return
        outcomes, planned = read(engine, lambda conn: sentinel_outcomes(conn, run_id))
        found = drift(outcomes, planned, pinned["agreed"], pinned["n"])
        if found["settled"]:
            info = {"kind": JUDGE_DRIFT, "run_id": run_id, **{k: found[k] for k in ("agreed", "judged", "planned")}}
            stopper.stop(run.update_id, run_id, JUDGE_DRIFT, WITH_UPDATE, info)
    except Exception as exc:  # judged again at the next write-back, and by finalize in any case
        log.warning("run %s: could not read its sentinels: %s", run_id, first_line(exc))


def _target(conn, name: str, pinned: PinnedJudge | PinnedLive, role: str) -> CallTarget:
    record = version_record(conn, name, pinned.version)
    if record is None:
        raise UsageError(f"version {pinned.version} of {name} is not in the prompt history")
    decl = ProviderDecl.from_dict(dict(pinned.provider)) if pinned.provider else None
    price = None if pinned.price is None else dict(pinned.price)
    return CallTarget(parse_spec(record["config"]), endpoint_for(decl), price, role)


def _outcome(first: str, second: str) -> str:
    """Both orders' verdicts: a win or a loss only when they agree."""
    if first == second:
        return {CANDIDATE: "win", LIVE: "loss"}.get(first, TIE)
    return "inconsistent"


def _said(answers: list[Answered]) -> str | None:
    raw = next((a.raw for a in answers if a.raw), None)
    return None if raw is None else raw[:SAID_LIMIT]


def _role_figures(role: str, answers: list[Answered]) -> dict[str, int | None]:
    """Calls made and tokens of the answers used, as the item's judge column counts them."""
    return {
        f"{role}_calls": sum(1 for a in answers if a.called),
        f"{role}_answers": len(answers),
        f"{role}_in": token_total(a.prompt_tokens for a in answers),
        f"{role}_out": token_total(a.completion_tokens for a in answers),
    }


def judged_answers(results: list[ItemResult], update_id: int, run_id: int) -> list[Answer]:
    """The answers a chunk's judging obtained, kept for reuse (not an invalid one)."""
    kept = []
    for r in results:
        for answer, trial_of in getattr(r.judging, "answers", ()):
            if answer.key and answer.text is not None and answer.text != INVALID_DECISION:
                kept.append(
                    Answer(
                        answer.key,
                        answer.text,
                        (answer.raw or "")[:RAW_OUTPUT_LIMIT],
                        answer.latency_ms,
                        answer.prompt_tokens,
                        answer.completion_tokens,
                        update_id,
                        run_id,
                        trial_of=trial_of,
                    )
                )
    return kept


def write_judged(conn, run_id: int, results: list[ItemResult]) -> None:
    """In the write-back's transaction, once its items were written under their lease: the
    sentinels judged beside them (each once: guarded by its verdict still PENDING)."""
    sentinels = [s for r in results if r.judging is not None for s in r.judging.sentinels]
    if sentinels:
        write_sentinel_results(conn, run_id, sentinels)
