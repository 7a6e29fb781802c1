"""Materialize: copy a run's dataset into prompt_run_item page by page after a cursor.

Each page is one transaction: the cursor advance (guarded by the lease token, which also
renews the lease) comes first, then the page's items. A worker killed mid-page leaves
nothing; the next lease reads the page again. The first page moves the run (and its
update) to RUNNING, so execution starts while later pages are still being read.
"""

from __future__ import annotations

import logging
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy.exc import IntegrityError

from gate import store
from gate.db import transaction
from gate.errors import DatasetError, IllegalTransition
from gate.models import Run
from gate.sources import Row, SourceOptions, combine_digest, load_readers, open_source
from gate.states import RunStatus

from .poller import Poller

log = logging.getLogger("promptgate.materialize")
EXAMPLES = 3


class LeaseLost(Exception):
    pass


class Materializer(Poller):
    role = "materialize"

    def __init__(self, gate, stop, activity=None):
        super().__init__(gate, stop, activity)
        load_readers()   # imported now, not on the first submission's critical path

    def poll(self) -> float:
        with self.engine.begin() as conn:
            claimed = store.claim_materialize(conn, self.settings.lease_seconds, 1)
        if not claimed:
            return self.idle()
        run, token = claimed[0]
        self.materialize(run, token)
        return self.busy()

    def materialize(self, run: Run, token: str) -> None:
        try:
            self._read_all_pages(run, token)
        except DatasetError as exc:
            self._fail(run, token, str(exc))
        except LeaseLost:
            log.warning("run %s: lease lost while materializing; another worker continues", run.id)

    def _read_all_pages(self, run: Run, token: str) -> None:
        with self.engine.connect() as conn:
            _, config = store.candidate_config_of_run(conn, run.id)
        labels = {label.casefold(): label for label in config["labels"]}
        options = SourceOptions(max_row_bytes=self.settings.max_row_bytes, **run.source_options)
        reader = open_source(run.source_uri, options)
        try:
            version = reader.snapshot_version()
            if run.source_version and run.source_version != version:
                raise DatasetError(f"dataset {run.dataset_name} changed while it was being read "
                                   f"({run.source_version} → {version}); resubmit to evaluate the new data")
            digest, started = run.content_hash, run.status == RunStatus.RUNNING
            for page in self._pages(reader, run.materialize_cursor):
                if self.stop.is_set():
                    raise LeaseLost  # draining: leave the rest to the next lease
                rows = self._validate(run, page.rows, labels)
                digest = combine_digest(digest, page.rows)
                self._commit_page(run, token, rows, page.next_cursor, digest, version, started)
                started = True
                self.nudge("execute")
        finally:
            reader.close()

    def _pages(self, reader, cursor):
        """Pages after ``cursor``, the next one read in a thread while this one is being
        committed (reading is CPU in Python, committing is waiting on the server)."""
        with ThreadPoolExecutor(1, thread_name_prefix="read-ahead") as pool:
            ahead = pool.submit(reader.read_page, cursor, self.settings.page_size)
            try:
                while ahead is not None:
                    page = ahead.result()
                    ahead = (pool.submit(reader.read_page, page.next_cursor, self.settings.page_size)
                             if page.next_cursor is not None else None)
                    yield page
            finally:
                if ahead is not None:
                    ahead.cancel()
                    try:
                        ahead.result()
                    except Exception:
                        pass   # a read ahead of a failed page: its error is not the one to report

    def _validate(self, run: Run, rows: list[Row], labels: dict[str, str]) -> list[tuple[str, dict, str]]:
        unknown = [r for r in rows if r.expected.casefold() not in labels]
        if unknown:
            examples = "; ".join(f"{r.position} item {r.item_id}: {r.expected!r}" for r in unknown[:EXAMPLES])
            raise DatasetError(f"dataset {run.dataset_name}: {len(unknown)} row(s) with a label the prompt does not "
                               f"have (labels: {', '.join(labels.values())}): {examples}")
        dupes = [i for i, n in Counter(r.item_id for r in rows).items() if n > 1]
        if dupes:
            raise DatasetError(f"dataset {run.dataset_name}: duplicate item ids: {', '.join(dupes[:EXAMPLES])}")
        return [(r.item_id, r.input_json, labels[r.expected.casefold()]) for r in rows]

    def _commit_page(self, run: Run, token: str, rows, cursor, digest, version, started: bool) -> None:
        def commit(conn) -> None:
            if not started:   # the first page moves the update and the run to RUNNING
                self._ensure_running(conn, run, token)
            if not store.advance_materialize(conn, run.id, token, cursor=cursor, added_rows=len(rows),
                                             content_hash=digest, source_version=version,
                                             lease_seconds=self.settings.lease_seconds):
                raise LeaseLost
            store.insert_items(conn, run.id, rows)
            if cursor is None and not store.finish_materialize(conn, run.id, token):
                raise LeaseLost
        try:
            transaction(self.engine, commit)
        except IntegrityError:
            # The page and its cursor commit together, so a page is never in twice: an id
            # already there is a duplicate in the dataset (UNIQUE (run_id, item_id) said so).
            with self.engine.connect() as conn:
                dupes = store.existing_item_ids(conn, run.id, [r[0] for r in rows])
            raise DatasetError(f"dataset {run.dataset_name}: duplicate item ids: "
                               f"{', '.join(dupes[:EXAMPLES]) or '(see the dataset)'}") from None

    def _ensure_running(self, conn, run: Run, token: str) -> None:
        """Update first, then run: the lock order of cancel and submit, so a page commit
        and a cancellation cannot deadlock. A cancelled update stops the page."""
        if not store.start_update(conn, run.update_id):
            raise LeaseLost
        status = store.get_run(conn, run.id).status
        if status == RunStatus.PENDING:
            store.transition_run(conn, run.id, RunStatus.RUNNING, token=token)
        elif status != RunStatus.RUNNING:
            raise LeaseLost

    def _fail(self, run: Run, token: str, reason: str) -> None:
        """End the run in ERROR (through RUNNING, as the state machine goes) and release it."""
        log.info("run %s: %s", run.id, reason)
        def fail(conn) -> None:
            self._ensure_running(conn, run, token)
            store.transition_run(conn, run.id, RunStatus.ERROR, reason=reason[:2000], token=token)
        try:
            transaction(self.engine, fail)
        except (IllegalTransition, LeaseLost):
            log.warning("run %s: could not record the error (lease lost or run cancelled)", run.id)
