"""Retention on the domain API (``Retention``, a service of ``Gate``): ``prune`` deletes what is older than an age
and no longer needed (``gate.store.retention`` says what), in bounded transactions."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Engine

from gate import db
from gate.datasets.importer import discard_version
from gate.store.feedback import delete_feedback, prunable_feedback
from gate.store.retention import (
    count_prunable_answers,
    count_run_items,
    delete_answers,
    delete_run_items,
    lock_prunable_run,
    prunable_answer_keys,
    prunable_runs,
    prunable_versions,
    take_version,
)
from gate.store.sentinels import delete_run_sentinels
from gate.store.served import prune_served
from gate.store.stops import delete_tally

from .boundary import driver_errors_become_gate_errors

PRUNE_BATCH = 5000


@dataclass
class PruneReport:
    """What ``prune`` deleted (or, with ``dry_run``, would delete)."""

    runs: int = 0
    items: int = 0
    versions: int = 0
    version_rows: int = 0
    answers: int = 0
    dry_run: bool = False
    served_reports: int = 0  # production's reports of processes silent since before the age
    feedback: int = 0  # outcomes stored for canary rollouts decided before the age (their figures stay)


@driver_errors_become_gate_errors
class Retention:
    """``prune``, on one gate database (``engine``)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def prune(self, older_than: float, dry_run: bool = False, batch: int = PRUNE_BATCH) -> PruneReport:
        """Delete what is older than ``older_than`` seconds and no longer needed (see
        ``gate.store.retention``): item rows of finished runs, dataset versions nobody
        current or open reads, kept answers, the reports of runtime processes silent since
        then and the feedback of rollouts decided before; in transactions of at most
        ``batch`` rows.
        With ``dry_run``, only count them."""
        with self.engine.connect() as conn:
            runs = prunable_runs(conn, older_than, 1_000_000)
            items = count_run_items(conn, runs)
            versions = prunable_versions(conn, older_than)
            answers = count_prunable_answers(conn, older_than) if dry_run else 0
        report = PruneReport(
            runs=len(runs),
            items=items,
            versions=len(versions),
            version_rows=sum(n for *_, n in versions),
            answers=answers,
            dry_run=dry_run,
        )
        if dry_run:
            return report
        for run_id in runs:  # each batch checks again that no open update reads the run
            while db.transaction(
                self.engine,
                lambda conn: lock_prunable_run(conn, run_id) and delete_run_items(conn, run_id, batch),
            ):
                pass
            db.transaction(  # its running counts and its sentinels go with its items
                self.engine,
                lambda conn: (
                    lock_prunable_run(conn, run_id) and delete_tally(conn, run_id) + delete_run_sentinels(conn, run_id)
                ),
            )
        report.versions, report.version_rows = self._take_versions(versions, older_than, batch)
        while keys := db.transaction(self.engine, lambda conn: prunable_answer_keys(conn, older_than, batch)):
            report.answers += db.transaction(self.engine, lambda conn: delete_answers(conn, keys))
        report.served_reports, report.feedback = self._prune_production(older_than, batch)
        return report

    def _prune_production(self, older_than: float, batch: int) -> tuple[int, int]:
        """Reports of runtime processes silent for ``older_than`` seconds, and the stored
        outcomes of rollouts decided that long ago, in batches. Returns (reports, outcomes)."""
        reports = outcomes = 0
        while deleted := db.transaction(self.engine, lambda conn: prune_served(conn, older_than, batch)):
            reports += deleted
        for rollout_id in db.transaction(self.engine, lambda conn: prunable_feedback(conn, older_than)):
            while deleted := db.transaction(self.engine, lambda conn: delete_feedback(conn, rollout_id, batch)):
                outcomes += deleted
        return reports, outcomes

    def _take_versions(self, versions: list[tuple[int, int, int]], older_than: float, batch: int) -> tuple[int, int]:
        """Delete the listed versions that are still prunable when taken (each is checked
        again under its dataset's lock: it may have become current or pinned since it was
        listed). Returns (versions, rows) deleted."""
        taken = rows_taken = 0
        for version_id, dataset_id, rows in versions:
            if db.transaction(self.engine, lambda conn: take_version(conn, version_id, dataset_id, older_than)):
                discard_version(self.engine, version_id, batch)
                taken, rows_taken = taken + 1, rows_taken + rows
        return taken, rows_taken
