"""Reconcile: an update whose runs are all terminal ends APPLIED / PASSED / REJECTED /
FAILED, after each finished run is compared with the live version's answers on the same
items (the baseline pinned at submit, finished by now too). Apply is one transaction guarded by the update's status (still RUNNING, so a
cancelled update never applies) and by the live version still being ``base_version``.
Only this worker writes the live ``prompt`` table."""

from __future__ import annotations

import logging
from dataclasses import replace

from gate import store
from gate.db import transaction
from gate.update_outcome import update_end
from gate.models import Run
from gate.states import RunStatus, UpdateStatus

from .figures import policy_metrics
from .poller import Poller

log = logging.getLogger("promptgate.reconcile")
BATCH = 20


class Reconciler(Poller):
    role = "reconcile"

    def poll(self) -> float:
        ids = transaction(self.engine, reconcile_batch, wrote=bool)
        return self.busy() if len(ids) == BATCH else (self.idle() if not ids else self.settings.poll_interval)


def reconcile_batch(conn) -> list[int]:
    ids = store.reconcilable_updates(conn, BATCH)
    for update_id in ids:
        reconcile_one(conn, update_id)
    return ids


def reconcile_one(conn, update_id: int) -> UpdateStatus:
    upd = store.get_update(conn, update_id)
    runs = [_compared(conn, run) for run in store.runs_of_update(conn, update_id)]
    status, reason = update_end(upd.mode, runs)
    if status == UpdateStatus.APPLIED and not store.write_live(conn, upd):
        live = store.live_version(conn, upd.prompt_name)
        status, reason = UpdateStatus.FAILED, (
            f"cleared every bar but was not applied: the live version is {live}, not {upd.base_version} as at "
            "submit (another change went live first); resubmit to evaluate against it")
    store.transition_update(conn, update_id, status, reason)
    log.info("update %s: %s (%s)", update_id, status, reason)
    return status


def _compared(conn, run: Run) -> Run:
    """The run with its comparison against the live version (``comparison_metrics``)
    written into its metrics: every baseline run of the update is terminal by now."""
    if run.status != RunStatus.DONE:
        return run
    metrics = {**(run.metrics or {}), **comparison_metrics(conn, run)}
    metrics.update(policy_metrics(conn, run, metrics))      # fields, slices, protected, accepted
    store.set_run_metrics(conn, run.id, metrics)
    return replace(run, metrics=metrics)


def comparison_metrics(conn, run: Run) -> dict:
    """The candidate's items paired with the live version's answers on the same dataset
    version (the baseline pinned at submit): fixed, broken, both right, both wrong, and
    the live accuracy; or why there is no comparison (``baseline_note``;
    ``baseline_error`` when the live version's run failed)."""
    pinned = run.pinned or {}
    baseline = pinned.get("baseline")
    metrics = run.metrics or {}
    if not baseline:
        return {"flips": None, "baseline_note": pinned.get("baseline_note") or "no live version to compare with",
                "baseline_error": pinned.get("baseline_error")}
    if baseline.get("same_config"):     # the candidate is the live config: every item agrees with itself
        matches, scored = metrics.get("matches", 0), metrics.get("scored", 0)
        return {"flips": {"fixed": 0, "broken": 0, "both_right": matches, "both_wrong": scored - matches,
                          "paired": scored}, "baseline_note": None,
                "live": {"matches": matches, "scored": scored, **baseline}}
    live_run = store.get_run(conn, baseline["run_id"])
    if live_run.status != RunStatus.DONE:
        why = f"the live version could not be scored on this dataset version: {live_run.reason or live_run.status}"
        return {"flips": None, "baseline_note": why, "baseline_error": why}
    flips = store.flip_counts(conn, run.id, live_run.id)
    live = live_run.metrics or {}
    if not flips["paired"] or flips["paired"] != metrics.get("scored") or flips["paired"] != live.get("scored"):
        why = (f"the live version's answers are incomplete: {flips['paired']} of {metrics.get('scored')} items "
               f"paired with run {live_run.id}")
        return {"flips": None, "baseline_note": why, "baseline_error": why}
    return {"flips": flips, "baseline_note": None,
            "live": {"matches": live.get("matches", 0), "scored": live.get("scored", 0), **baseline}}
