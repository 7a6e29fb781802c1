"""Reconcile: an update whose runs are all terminal ends APPLIED / PASSED / REJECTED /
FAILED, after each finished run is compared with the live version's answers on the same
items (the baseline pinned at submit, finished by now too), and a run stopped early has
its stop confirmed on its final figures (one GROUP BY over its items, as the tally that
stopped it counted them). Apply is one transaction guarded by the update's status (still RUNNING, so a
cancelled update never applies) and by the live version still being ``base_version``.
This worker runs the reconcile step, the one writer of the live ``prompt`` table
(``gate.domain.live_transition``): an apply (an update that pinned a ``rollout:`` starts its
canary in the same transaction), and each PENDING ``live_request`` — a person's rollback, a
canary's decision — which it carries out before the updates of its poll (the activity probe
sees them, so an idle worker picks one up within one probe interval)."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import cast

from gate.calls.spend_caps import nano_text
from gate.db import is_retryable, transaction
from gate.errors import IllegalTransition
from gate.kinds import checks_of, kind_of
from gate.records import Run
from gate.records.metrics import RunFigures, RunMetrics, StopFigures
from gate.states import RunStatus, UpdateStatus
from gate.store.item_stats import flip_counts
from gate.store.live_requests import pending_live_requests
from gate.store.live_transition import apply_update, carry_out_request, refuse_request
from gate.store.runs import get_run, runs_of_update, set_run_metrics
from gate.store.spend import spend_of_update
from gate.store.stops import outcome_counts
from gate.store.updates import get_update, lock_reconcilable, reconcilable_updates, transition_update
from gate.store.versions import get_version
from gate.verdict.bars import pinned_bars
from gate.verdict.early_stop import Outcomes, best_case, explain, missed_bars
from gate.verdict.update_outcome import ACCEPTED_UNJUDGED, EARLY_STOP, SPEND_CAP, update_end
from workers.execute.early_stop import live_pair
from workers.figures import policy_metrics
from workers.give_up import GAVE_UP, GiveUp
from workers.poller import Poller

log = logging.getLogger("promptgate.reconcile")
BATCH = 20


class Reconciler(Poller):
    role = "reconcile"

    def __init__(self, engine, settings, stop, activity=None):
        super().__init__(engine, settings, stop, activity)
        self.give_up = GiveUp(self.role, settings.finalize_attempts)
        self.give_up_requests = GiveUp(self.role, settings.finalize_attempts)

    def poll(self) -> float:
        carried = carry_out_pending(self.engine, BATCH, self.give_up_requests)  # rollbacks, canary decisions first
        try:
            ids = transaction(self.engine, reconcile_batch, wrote=bool)
        except Exception as exc:
            if is_retryable(exc):
                raise  # the poller's backoff: the database's fault, not an update's
            ids = self._one_by_one()
        if len(ids) == BATCH or carried == BATCH:
            return self.busy()
        return self.idle() if not ids and not carried else self.settings.poll_interval

    def _one_by_one(self) -> list[int]:
        """The batch again, each update in its own transaction: one that raises is counted
        (``_failed``) and the others end."""
        return self.give_up.one_by_one(
            transaction(self.engine, lambda conn: reconcilable_updates(conn, BATCH)),
            lambda update_id: transaction(self.engine, lambda conn: reconcile_locked(conn, update_id)),
            self._failed,
        )

    def _failed(self, update_id: int, exc: Exception) -> None:
        """At the bound (``workers.give_up``) the update ends FAILED naming the error's id (a
        guarded transition: one another worker ended meanwhile stays as it is)."""
        gave_up = self.give_up.failed(update_id, f"update {update_id}", exc)
        if gave_up is None:
            return
        why = GAVE_UP.format(what=f"update {update_id}", done="reconciled", count=gave_up[0], id=gave_up[1])
        try:
            transaction(self.engine, lambda conn: transition_update(conn, update_id, UpdateStatus.FAILED, why))
        except IllegalTransition:
            return  # no longer RUNNING: ended by another worker
        log.error("update %s ended FAILED (error id %s)", update_id, gave_up[1])


def reconcile_locked(conn, update_id: int) -> bool:
    """Reconcile one update in its own transaction, locked and checked again as
    ``reconcilable_updates`` does (False: taken or ended meanwhile)."""
    if not lock_reconcilable(conn, update_id):
        return False
    reconcile_one(conn, update_id)
    return True


def carry_out_pending(engine, limit: int = BATCH, give_up: GiveUp | None = None) -> int:
    """The reconcile step for the PENDING live requests (rollbacks, canary decisions), oldest
    first, each claimed and carried out in a transaction of its own; returns how many this
    call carried out (one claimed by another process is skipped). ``give_up``: a request
    whose carrying out raises an unexpected error is counted and passed over (the updates'
    step goes on), and at the bound ends REFUSED naming the error's id; None: it is raised."""
    with engine.connect() as conn:
        ids = pending_live_requests(conn, limit)
    done = 0
    for request_id in ids:
        try:
            status = transaction(engine, lambda conn, i=request_id: carry_out_request(conn, i))
        except Exception as exc:
            if give_up is None or is_retryable(exc):
                raise
            _refuse_at_bound(engine, give_up, request_id, exc)
            continue
        if status is not None:
            done += 1
            log.info("live request %s: %s", request_id, status)
    return done


def _refuse_at_bound(engine, give_up: GiveUp, request_id: int, exc: Exception) -> None:
    gave_up = give_up.failed(request_id, f"live request {request_id}", exc)
    if gave_up is None:
        return
    why = GAVE_UP.format(what=f"live request {request_id}", done="carried out", count=gave_up[0], id=gave_up[1])
    try:
        transaction(engine, lambda conn: refuse_request(conn, request_id, why))
    except IllegalTransition:
        pass  # no longer PENDING: carried out by another worker


def reconcile_batch(conn) -> list[int]:
    ids = reconcilable_updates(conn, BATCH)
    for update_id in ids:
        reconcile_one(conn, update_id)
    return ids


def reconcile_one(conn, update_id: int) -> UpdateStatus:
    upd = get_update(conn, update_id)
    runs = [_compared(conn, run, upd) for run in runs_of_update(conn, update_id)]
    status, reason = update_end(upd.mode, runs, checks_of, accepted=bool((upd.source or {}).get(ACCEPTED_UNJUDGED)))
    if status == UpdateStatus.APPLIED:
        refused = apply_update(conn, upd)  # the live row, its history, the canary: gate.domain.live_transition
        if refused:
            status, reason = UpdateStatus.FAILED, refused
    transition_update(conn, update_id, status, reason)
    log.info("update %s: %s (%s)", update_id, status, reason)
    return status


def _compared(conn, run: Run, upd) -> Run:
    """The run with its comparison against the live version (``comparison_metrics``)
    written into its metrics: every baseline run of the update is terminal by now. A run
    stopped before all its items were called gets its stop confirmed and said in words
    (``stop_figures``)."""
    if run.status != RunStatus.DONE:
        return run
    figures = RunFigures.of(run.metrics).extended(**comparison_metrics(conn, run))
    figures = figures.extended(**kind_of(run.pinned.decision).live.compared(figures))  # a judge's: wins, losses
    figures = figures.extended(**policy_metrics(conn, run, figures))  # fields, slices, protected, accepted
    if figures.stop:
        figures = figures.extended(stop=stop_figures(conn, run, figures, upd))
    metrics = figures.to_json()  # written through the figures' codec
    set_run_metrics(conn, run.id, metrics)
    return replace(run, metrics=cast(RunMetrics, metrics))


def stop_figures(conn, run: Run, figures: RunFigures, upd) -> StopFigures:
    """A stopped run's stop, confirmed on its final figures and said in words. Settled
    early (``early_stop``): the bars its best completion misses (gate/verdict/early_stop.py:
    ``missed_bars``), that completion's figures (``best``) and the sentence; none missed
    (never expected) and the verdict is FAILED, not REJECTED. Stopped at a spend cap: the
    cap and the figures."""
    stop = figures.stop or StopFigures()
    if stop.kind == EARLY_STOP:
        # stopped early by its judge, which counts against its version (execute's RunContext.load)
        assert run.dataset_version_id is not None
        version = get_version(conn, run.dataset_version_id)
        live_id, live_right = live_pair(conn, run)
        by_label = kind_of(run.pinned.decision).counts_by_label(run.pinned.decision)  # fields: no labels (add_tally)
        outcomes = Outcomes.from_rows(
            outcome_counts(conn, run.id, live_id, by_label),
            version.row_count,
            (version.labels or {}) if by_label else {},
            live_right,
        )
        missed = missed_bars(pinned_bars(run.pinned, run.min_accuracy), outcomes, checks_of(run))
        best = best_case(outcomes)
        stop = stop.extended(
            missed=[c.to_dict() for c in missed],
            sentence=explain(outcomes, missed) if missed else None,
            best={k: best[k] for k in ("matches", "scored", "confusion", "flips")},
        )
    elif stop.kind == SPEND_CAP:
        cap = upd.stopped or {}
        calls, cost, _ = spend_of_update(conn, upd.id)
        spent = (
            f"${nano_text(cost)} reserved for {calls:,} calls"
            if cap.get("cap") == "max_cost_per_update_usd"
            else f"{calls:,} calls made"
        )
        limit = cap.get("limit")
        limit = f"${limit}" if cap.get("cap") == "max_cost_per_update_usd" else f"{int(limit or 0):,}"
        stop = stop.extended(
            sentence=(
                f"{cap.get('cap')} {limit}: {spent}; {figures.stopped or 0:,} of "
                f"{figures.total or 0:,} items of {run.dataset_name} not called"
                + (f" ({cap['why']})" if cap.get("why") else "")
            )
        )
    return stop


def comparison_metrics(conn, run: Run) -> dict:
    """The candidate's items paired with the live version's answers on the same dataset
    version (the baseline pinned at submit): fixed, broken, both right, both wrong, and
    the live accuracy; or why there is no comparison (``baseline_note``;
    ``baseline_error`` when the live version's run failed)."""
    pinned = run.pinned
    baseline = pinned.baseline
    metrics = run.metrics or {}
    if not baseline:
        return {
            "flips": None,
            "baseline_note": pinned.baseline_note or "no live version to compare with",
            "baseline_error": pinned.baseline_error,
        }
    if baseline.same_config:  # the candidate is the live config: every item agrees with itself
        matches, scored = metrics.get("matches", 0), metrics.get("scored", 0)
        return {
            "flips": {"fixed": 0, "broken": 0, "both_right": matches, "both_wrong": scored - matches, "paired": scored},
            "baseline_note": None,
            "live": {"matches": matches, "scored": scored, **baseline.to_json()},
        }
    live_run = get_run(conn, cast(int, baseline.run_id))
    if metrics.get("stop"):  # stopped: the items answered, against live where it is whole
        if live_run.status != RunStatus.DONE or live_run.stopped:
            return {"flips": None, "baseline_note": "not compared: the live version's run stopped too"}
        live = live_run.metrics or {}
        return {
            "flips": flip_counts(conn, run.id, live_run.id),
            "baseline_note": None,
            "live": {"matches": live.get("matches", 0), "scored": live.get("scored", 0), **baseline.to_json()},
        }
    if live_run.status != RunStatus.DONE:
        why = f"the live version could not be scored on this dataset version: {live_run.reason or live_run.status}"
        return {"flips": None, "baseline_note": why, "baseline_error": why}
    flips = flip_counts(conn, run.id, live_run.id)
    live = live_run.metrics or {}
    if not flips["paired"] or flips["paired"] != metrics.get("scored") or flips["paired"] != live.get("scored"):
        why = (
            f"the live version's answers are incomplete: {flips['paired']} of {metrics.get('scored')} items "
            f"paired with run {live_run.id}"
        )
        return {"flips": None, "baseline_note": why, "baseline_error": why}
    return {
        "flips": flips,
        "baseline_note": None,
        "live": {"matches": live.get("matches", 0), "scored": live.get("scored", 0), **baseline.to_json()},
    }
