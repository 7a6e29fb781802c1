"""Finalize: a RUNNING run with every page in and no item left to score gets its metrics
from one GROUP BY (a fields decision: and one aggregate of its fields, ``figures``) and
ends DONE, or ERROR (no items, or items that could not be scored beyond the mapping's
``max_error_rate``, 0 by default: its reason says how many items and of which kinds of
error, from one more GROUP BY; the first one's id and error go to the metrics' item
detail, ``gate.verdict.reasons``). A run stopped before every item
was called (early stop, a spend cap) ends DONE: its update's verdict is the stop's; its
figures say what was called, reused and saved, and the counters /metrics reads grow by
them.

A run whose finalize raises an unexpected error (not a database fault the poller retries: a
stored row it cannot read, say) is tried alone, apart from its batch, so the other runs end;
at the bound (``workers.give_up``: ``PROMPTGATE_FINALIZE_ATTEMPTS`` failures in a row) it ends
ERROR with a reason that gives the error id the log has the traceback under, and its update
then ends FAILED (never APPLIED)."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

from gate.db import is_retryable, transaction
from gate.errors import CallFailure, IllegalTransition
from gate.kinds import kind_of
from gate.records.metrics import RunFigures, StopFigures
from gate.states import RunStatus
from gate.store.item_stats import call_stats, error_kinds, failing_items, first_error_of
from gate.store.items import fail_exhausted_items
from gate.store.runs import (
    finalizable_runs,
    get_run,
    lock_run_query,
    run_has_unscored_items,
    running_runs,
    transition_run,
)
from gate.store.spend import add_counters
from gate.store.stops import count_uncalled, read_tally, unrecorded_claims
from gate.store.trials import count_unstable, trial_call_stats
from gate.verdict.bars import pinned_bars
from gate.verdict.reasons import ITEM_DETAIL, first_error_detail
from gate.verdict.scoring import run_end
from gate.verdict.update_outcome import SPEND_CAP
from workers.figures import StoreFigures
from workers.give_up import GAVE_UP, GiveUp
from workers.judge_figures import calls_per_item, judged_end, judged_metrics
from workers.poller import Poller
from workers.tool_figures import schema_metrics

BATCH = 20


class Finalizer(Poller):
    role = "finalize"

    def __init__(self, engine, settings, stop, activity=None):
        super().__init__(engine, settings, stop, activity)
        self.swept_at = 0.0
        self.give_up = GiveUp(self.role, settings.finalize_attempts)

    def poll(self) -> float:
        self._sweep_exhausted()
        try:
            ids = transaction(self.engine, finalize_batch, wrote=bool)
        except Exception as exc:
            if is_retryable(exc):
                raise  # the poller's backoff: the database's fault, not a run's
            ids = self._one_by_one()
        if ids:
            self.nudge("reconcile")
        return self.busy() if len(ids) == BATCH else (self.idle() if not ids else self.settings.poll_interval)

    def _one_by_one(self) -> list[int]:
        """The batch again, each run in its own transaction: a run that raises is counted
        (``_failed``) and the others end."""
        return self.give_up.one_by_one(
            transaction(self.engine, lambda conn: finalizable_runs(conn, BATCH)),
            lambda run_id: transaction(self.engine, lambda conn: finalize_one(conn, run_id)),
            self._failed,
        )

    def _failed(self, run_id: int, exc: Exception) -> None:
        """At the bound (``GiveUp``) the run ends ERROR saying so (a guarded transition: a run
        another worker ended meanwhile stays as it is); its update then ends FAILED."""
        gave_up = self.give_up.failed(run_id, f"run {run_id}", exc)
        if gave_up is None:
            return
        count, found = gave_up
        why = GAVE_UP.format(what=f"run {run_id}", done="finalized", count=count, id=found)
        try:
            transaction(self.engine, lambda conn: transition_run(conn, run_id, RunStatus.ERROR, reason=why))
        except IllegalTransition:
            return  # no longer RUNNING: ended by another worker
        self.give_up.log.error("finalize: run %s ended ERROR (error id %s)", run_id, found)
        self.nudge("reconcile")

    def _sweep_exhausted(self) -> None:
        """Items at a cap that nobody claims any more — their attempts spent, or their last
        claims all lost to workers that died: final ERROR, so the run can end. Runs at most
        once per half lease."""
        if time.monotonic() - self.swept_at < self.settings.lease_seconds / 2:
            return
        self.swept_at = time.monotonic()

        def sweep(conn) -> None:
            for run_id in running_runs(conn):
                fail_exhausted_items(conn, run_id, self.settings.attempt_cap, self.settings.claim_cap)

        transaction(self.engine, sweep)


def call_metrics(conn, run, total: int) -> dict[str, Any]:
    """The calls' latency (p50, p95, max in ms) and token sums, for the report and the
    latency bar; with the price pinned at submit and every answer metered, their cost
    (``cost_usd``, exact decimal text), else why there is none (``cost_note``). With
    trials, per call over every trial (``calls``: how many), and the unstable items."""
    trials = run.pinned.trials
    calls = trial_call_stats(conn, run.id) if trials else call_stats(conn, run.id)
    extra = {"unstable": count_unstable(conn, run.id)} if trials else {}
    unmetered = calls.pop("unmetered")
    price = run.pinned.price
    if not price:
        return {
            "calls": calls,
            "cost_usd": None,
            **extra,
            "cost_note": f"no price for model {run.pinned.model!r} in the gate's price table",
        }
    if unmetered:
        return {
            "calls": calls,
            "cost_usd": None,
            **extra,
            "cost_note": f"{unmetered} of {calls.get('calls', total)} answers came without token counts",
        }
    cost = (
        calls["prompt_tokens"] * Decimal(price["input_per_million"])
        + calls["completion_tokens"] * Decimal(price["output_per_million"])
    ) / 1_000_000
    return {"calls": calls, "cost_usd": f"{cost:f}", **extra}


def finalize_batch(conn) -> list[int]:
    """Finalize up to BATCH runs in one transaction; returns their ids."""
    return [run_id for run_id in finalizable_runs(conn, BATCH) if finalize_run(conn, run_id)]


def finalize_one(conn, run_id: int) -> bool:
    """Finalize one run in its own transaction, locked and checked again as
    ``finalizable_runs`` does (False: taken, ended or not ready meanwhile)."""
    if conn.execute(lock_run_query(run_id)).first() is None or run_has_unscored_items(conn, run_id):
        return False
    return finalize_run(conn, run_id)


def finalize_run(conn, run_id: int) -> bool:
    """Finalize one run locked by the caller; True when it ended."""
    run = get_run(conn, run_id)
    kind, source = kind_of(run.pinned.decision), StoreFigures(conn)
    figures = RunFigures.made(**kind.counts(source, run_id, run.pinned.decision))  # by label, or field by field
    if figures.pending:  # cannot happen under the lock; never score a run that is not done
        return False
    figures = figures.extended(**kind.figures(source, run_id, run.pinned.decision))  # a fields decision's
    figures = figures.extended(**kind.marks(source, run_id, run.pinned.decision))
    figures = figures.extended(**schema_metrics(conn, run))
    kinds, budget = None, None
    if figures.errors:  # the reason says how many and of which kinds; which ones, the detail
        kinds = error_kinds(conn, run_id)
        budget = first_error_of(conn, run_id, CallFailure.BUDGET) if kinds.get(CallFailure.BUDGET) else None
        first = failing_items(conn, run_id, 1, errors_only=True)
        if first:
            figures = figures.extended(**{ITEM_DETAIL: first_error_detail(first[0].item_id, first[0].error)})
    if kinds:  # counts by kind, never which items: any reader of the report may read them
        figures = figures.extended(error_kinds=kinds)
    error_rate = pinned_bars(run.pinned, run.min_accuracy).max_error_rate
    status, reason = run_end(
        {"total": figures.total, "errors": figures.errors},
        run.dataset_name,
        kinds,
        stopped=bool(run.stopped),
        budget=budget,
        max_error_rate=error_rate,
    )
    figures = figures.extended(**call_metrics(conn, run, int(figures.total or 0)))
    figures = figures.extended(**spend_figures(conn, run, figures))
    figures = figures.extended(**judged_metrics(conn, run, figures))  # a judged run: its judge's, its sentinels
    status, reason = judged_end(run, figures, status, reason)
    transition_run(conn, run_id, status, reason=reason, metrics=figures.to_json())
    add_counters(conn, run_counters(run, figures))
    return True


def spend_figures(conn, run, figures: RunFigures) -> dict[str, Any]:
    """What the run's answers cost in calls: made (every call the executor recorded for it,
    from its tally), at most how many more may have been made and never recorded
    (``calls_unrecorded``: its claims no write-back settled — workers killed holding
    them —, each executor's no more than its bound, times its calls per item), reused
    (answers already paid for), and saved by a stop — its items never called, times its
    calls per item (its trials, its judge's); a stopped run's rows never copied count as
    items, its ``total`` is its dataset version's rows and ``stop`` says why it stopped.
    The values by key, in the order written, for ``RunFigures.extended``."""
    _, made = read_tally(conn, run.id)
    trials = calls_per_item(run.pinned)
    out = {
        "calls_made": made,
        "calls_unrecorded": unrecorded_claims(conn, run.id) * trials,
        "calls_reused": _reused(figures),
        "calls_saved": 0,
    }
    if not run.stopped:
        return out
    total = int(figures.total or 0)
    rows = int(run.pinned.rows or total)
    never_copied = max(0, rows - total)
    return {
        **out,
        "total": max(rows, total),
        "stopped": (figures.stopped or 0) + never_copied,
        "calls_saved": (count_uncalled(conn, run.id) + never_copied) * trials,
        "stop": StopFigures.made(kind=run.stopped),
    }


def _reused(figures: RunFigures) -> int:
    """The answers reused (``call_metrics``' ``calls``)."""
    calls = figures.calls
    return int(calls.reused or 0) if calls else 0


def run_counters(run, figures: RunFigures) -> dict[str, int]:
    """The /metrics counters a finished run adds to (promptgate_model_calls_saved_total,
    promptgate_model_calls_recorded_total, promptgate_model_calls_unrecorded_max_total)."""
    stop = "spend_cap" if run.stopped == SPEND_CAP else "early_stop"
    return {
        "calls_saved_reuse": figures.calls_reused or 0,
        f"calls_saved_{stop}": figures.calls_saved or 0,
        "calls_recorded": figures.calls_made or 0,
        "calls_unrecorded": figures.calls_unrecorded or 0,
    }
