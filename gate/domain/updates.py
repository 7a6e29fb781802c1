"""An update once submitted, on the domain API (``Updates``, a service of ``Gate``): its
report (``status``), waiting for it to end, the updates of a commit or in a list, cancelling
one, and the fleet that works on them."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from gate import db
from gate.contract.release import of_mode
from gate.errors import Forbidden, NotFound, UsageError
from gate.records import FleetCounts, Update, WorkerRow
from gate.records.metrics import RunFigures
from gate.report import SAMPLE_FAILURES
from gate.report.canary import rollout_summary
from gate.report.unjudged import accepted
from gate.report.update import UpdateReport, run_report
from gate.settings import Settings
from gate.states import UPDATE_TERMINAL, UpdateStatus
from gate.store.answers import reuse_stats
from gate.store.fleet import fleet_counts
from gate.store.item_stats import failing_items, flipped_items, item_attempt_stats, run_counts
from gate.store.ratelimits import rate_limit_stats
from gate.store.rollouts import rollout_of_update
from gate.store.runs import BASELINE, runs_of_update
from gate.store.trials import unstable_items
from gate.store.updates import (
    cancel_update,
    get_update,
    list_updates,
    lock_update_owner,
    update_status,
    updates_for_sha,
)
from gate.store.versions import get_version
from gate.store.workers import live_workers

from .boundary import driver_errors_become_gate_errors
from .conversations import with_inputs, with_last_turns
from .spending import update_spend


def _broken_items(conn, run, limit: int) -> list:
    """The first items the live version answered right and the run wrong (none before the
    run is compared: reconcile pairs the answers, ``flip_counts``)."""
    figures = RunFigures.of(run.metrics)
    live_run_id = figures.live.run_id if figures.live else None
    if not live_run_id or not limit or not figures.flipped("broken"):
        return []  # nothing broken: no scan of the run's items for none
    return flipped_items(conn, run.id, live_run_id, limit)


def _unstable_items(conn, run, limit: int) -> list:
    """The first items whose trials disagree (a run with trials only: no scan otherwise)."""
    if not run.pinned.trials or not limit or RunFigures.of(run.metrics).unstable == 0:
        return []
    return unstable_items(conn, run.id, limit)


def _readable(conn, run, may_read: Callable[[Any], bool], seen: dict[int, bool]) -> bool:
    version_id = run.dataset_version_id
    if version_id is None:
        return False
    if version_id not in seen:
        try:
            seen[version_id] = bool(may_read(get_version(conn, version_id)))
        except NotFound:
            seen[version_id] = False
    return seen[version_id]


@driver_errors_become_gate_errors
class Updates:
    """Submitted updates, on one gate database (``engine``; ``settings``: the workers' heartbeat)."""

    def __init__(self, engine: Engine, settings: Settings):
        self.engine = engine
        self.settings = settings

    def status(self, update_id: int, failures: int = SAMPLE_FAILURES) -> UpdateReport:
        with self.engine.connect() as conn:
            upd = get_update(conn, update_id)
            runs = runs_of_update(conn, update_id)
            counts = run_counts(conn, [r.id for r in runs])
            reused = reuse_stats(conn, [r.id for r in runs])
            reports = [
                run_report(
                    r,
                    counts[r.id],
                    with_inputs(
                        conn, r, with_last_turns(conn, r, upd.candidate_config, failing_items(conn, r.id, failures))
                    ),
                    reused[r.id],
                    with_inputs(conn, r, _broken_items(conn, r, failures)),
                    _unstable_items(conn, r, failures),
                    accepted=accepted(upd),
                )
                for r in runs
            ]
            ids = [r.id for r in runs]
            spend = update_spend(conn, upd, runs + runs_of_update(conn, update_id, BASELINE))
            rollout = rollout_of_update(conn, update_id) if upd.status == UpdateStatus.APPLIED else None
            attempts = {**item_attempt_stats(conn, ids), **rate_limit_stats(conn, ids)}
            return UpdateReport(upd, reports, attempts, spend, rollout_summary(rollout))

    def wait(
        self,
        update_id: int,
        timeout: float | None = None,
        poll: float = 0.25,
        on_poll: Callable[[UpdateReport], Any] | None = None,
    ) -> UpdateReport:
        """Poll until the update is terminal or ``timeout`` seconds pass, then build its
        report (at each poll as well for an ``on_poll`` callback)."""
        on_status = (lambda _status: on_poll(self.status(update_id))) if on_poll else None
        self.wait_status(update_id, timeout, poll, on_status)
        return self.status(update_id)

    def wait_status(
        self,
        update_id: int,
        timeout: float | None = None,
        poll: float = 0.25,
        on_status: Callable[[str], Any] | None = None,
    ) -> str:
        """Poll the update's status alone (release pipelines may wait on many updates) until
        it is terminal or ``timeout`` seconds pass; returns the last status read."""
        deadline = None if timeout is None else time.monotonic() + timeout
        reader = db.KeptConnection(self.engine)
        read = lambda conn: update_status(conn, update_id)  # noqa: E731
        try:
            while True:
                try:
                    status = reader.run(read)
                except DBAPIError:  # a dropped connection (server restart): once more on a fresh one
                    status = reader.run(read)
                if status in UPDATE_TERMINAL or (deadline is not None and time.monotonic() >= deadline):
                    return status
                if on_status:
                    on_status(status)
                time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))
        finally:
            reader.close()

    def updates_for_sha(self, sha: str, prompt_name: str | None = None, mode: str | None = None) -> list[Update]:
        """The commit's updates, oldest first (``mode``: those a release wait of that mode
        answers for, ``release.of_mode``)."""
        with self.engine.connect() as conn:
            found = updates_for_sha(conn, sha, prompt_name)
        return found if mode is None else of_mode(found, mode)[1]

    def list_updates(
        self,
        limit: int = 20,
        prompt_name: str | None = None,
        *,
        status: str | None = None,
        sha_prefix: str | None = None,
        before_id: int | None = None,
    ) -> list[Update]:
        """Newest first, optionally of one prompt, in one status, of commits whose SHA
        starts with ``sha_prefix`` (hex digits), older than update ``before_id``."""
        if sha_prefix is not None and not re.fullmatch(r"[0-9a-fA-F]{1,64}", sha_prefix):
            raise UsageError(f"{sha_prefix[:80]!r} is not the start of a commit SHA (hex digits)")
        with self.engine.connect() as conn:
            return list_updates(conn, limit, prompt_name, status=status, sha_prefix=sha_prefix, before_id=before_id)

    def unreadable_datasets(self, update_ids: list[int], may_read: Callable[[Any], bool]) -> dict[int, list[str]]:
        """Of each update, the datasets its runs read whose pinned version the caller may not
        read (``may_read(version)``: False for a holdout's; a version gone counts as one), for
        a list that shows the updates' reasons (issue 48: a holdout's per-field figure is left
        out of them the way a report leaves it out)."""
        seen: dict[int, bool] = {}
        out: dict[int, list[str]] = {}
        with self.engine.connect() as conn:
            for update_id in dict.fromkeys(update_ids):
                hidden = [
                    r.dataset_name for r in runs_of_update(conn, update_id) if not _readable(conn, r, may_read, seen)
                ]
                if hidden:
                    out[update_id] = hidden
        return out

    def cancel(self, update_id: int, reason: str = "cancelled by a user", *, owner: str | None = None) -> None:
        """Cancel an open update. ``owner``: the caller may cancel only updates the token of
        that name submitted (a submit token through the service); else Forbidden. None:
        any (the CLI on the database, an admin token)."""

        def cancel(conn):
            submitted_by = lock_update_owner(conn, update_id)
            if owner is not None and submitted_by != owner:
                raise Forbidden(
                    f"update {update_id} was not submitted by this token: a submit token cancels only "
                    "its own updates (an admin token cancels any)"
                )
            cancel_update(conn, update_id, reason)

        db.transaction(self.engine, cancel)

    def fleet(self) -> FleetCounts:
        """Updates and runs by status, open runs' items by state, the oldest waiting
        submission, live workers and their stalest heartbeat (three beats count as live)."""
        with self.engine.connect() as conn:
            return fleet_counts(conn, self.settings.heartbeat_seconds * 3)

    def live_workers(self) -> list[WorkerRow]:
        """Worker processes whose heartbeat is fresh (three beats)."""
        with self.engine.connect() as conn:
            return live_workers(conn, self.settings.heartbeat_seconds * 3)
