"""Materialize: copy a run's dataset into prompt_run_item page by page after a cursor.

Each page is one transaction: its items, then the cursor advance (guarded by the lease
token, which also renews the lease). A worker killed mid-page leaves nothing; the next
lease reads the page again. The first page moves the run (and its update) to RUNNING, so
execution starts while later pages are still being read.

Pages are written by ``WRITERS`` threads on their own connections (one on SQLite), so the server inserts
one page while the next is read and the one before commits; the cursor advances commit
strictly in page order (a page waits for the one before it, holding its uncommitted
items), so the committed cursor always covers exactly the committed items. Ids are
checked against the pages still in flight in memory, and against committed pages by the
table's UNIQUE (run_id, item_id): two pages in flight never wait on each other's rows.

Before the first page is written, the candidate's templates are rendered over its first
``PRECHECK_ROWS`` rows through the template sandbox: a template that exceeds its budget
there (a CPU or memory bomb) ends the run in ERROR before any item exists or any model is
called.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections import Counter
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

from sqlalchemy.exc import IntegrityError

from gate import store
from gate.db import is_sqlite, transaction
from gate.errors import DatasetError, IllegalTransition
from gate.models import Run
from gate.sandbox import BudgetExceeded, RenderBudget, RenderPool
from gate.sources import Row, SourceOptions, combine_digest, load_readers, open_source
from gate.states import RunStatus
from gate.templating import TemplateProblem

from .poller import Poller

log = logging.getLogger("promptgate.materialize")
EXAMPLES = 3
WRITERS = 2
FIRST_PAGE_ROWS = 128
PRECHECK_ROWS = 3


class LeaseLost(Exception):
    pass


class Materializer(Poller):
    role = "materialize"

    def __init__(self, gate, stop, activity=None, renderer: RenderPool | None = None):
        super().__init__(gate, stop, activity)
        self.owns_renderer = renderer is None
        self.renderer = renderer or RenderPool(RenderBudget.from_settings(self.settings))
        load_readers()   # imported now, not on the first submission's critical path

    def close(self) -> None:
        if self.owns_renderer:
            self.renderer.close()

    def poll(self) -> float:
        claimed = transaction(self.engine, lambda conn: store.claim_materialize(conn, self.settings.lease_seconds, 1),
                              wrote=bool)
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
            config = store.candidate_of_run(conn, run.id).config
        labels = {label.casefold(): label for label in config["labels"]}
        templates = [m["content"] for m in config["messages"]]
        options = SourceOptions(max_row_bytes=self.settings.max_row_bytes, **run.source_options)
        reader = open_source(run.source_uri, options)
        try:
            version = reader.snapshot_version()
            if run.source_version and run.source_version != version:
                raise DatasetError(f"dataset {run.dataset_name} changed while it was being read "
                                   f"({run.source_version} → {version}); resubmit to evaluate the new data")
            digest, started = run.content_hash, run.status == RunStatus.RUNNING
            # SQLite has one writer at a time: a page waiting for the one before it would hold
            # the write lock that one needs
            writers = 1 if is_sqlite(self.engine) else WRITERS
            with PageWriter(self.write_page, writers, run, token, version) as writer:
                for page in self._pages(reader, run.materialize_cursor):
                    if self.stop.is_set():
                        raise LeaseLost  # draining: leave the rest to the next lease
                    rows = self._validate(run, page.rows, labels)
                    if not started:
                        self._precheck_templates(run, templates, rows)
                    digest = combine_digest(digest, page.rows)
                    writer.submit(rows, page.next_cursor, digest, first=not started)
                    started = True
        finally:
            reader.close()

    def _pages(self, reader, cursor):
        """Pages after ``cursor``, read in this thread while the page writers insert the
        ones before (a read-ahead thread as well only added GIL hand-offs). A run's first
        page is short (``FIRST_PAGE_ROWS``): execution starts on it, and a full page is
        slower to commit. Later pages are sized by the rows read so far
        (``next_page_size``). The measurements behind each choice: bench/README.md."""
        size = min(self.settings.page_size, FIRST_PAGE_ROWS) if cursor is None else self.settings.page_size
        while True:
            page = reader.read_page(cursor, size)
            yield page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor
            size = next_page_size(page.rows, self.settings.page_size, self.settings.page_bytes)

    def _validate(self, run: Run, rows: list[Row], labels: dict[str, str]) -> list[tuple[str, str, str]]:
        """The page's (item_id, input JSON, label as the prompt spells it) rows, or the
        DatasetError that ends the run. Labels match case-insensitively; a page whose
        labels are all spelled as the prompt spells them (the usual case) skips that."""
        spelled = set(labels.values())
        if {r.expected for r in rows} <= spelled:
            checked = [(r.item_id, r.input_json, r.expected) for r in rows]
        else:
            unknown = [r for r in rows if r.expected.casefold() not in labels]
            if unknown:
                examples = "; ".join(f"{r.position} item {r.item_id}: {r.expected!r}" for r in unknown[:EXAMPLES])
                raise DatasetError(f"dataset {run.dataset_name}: {len(unknown)} row(s) with a label the prompt does "
                                   f"not have (labels: {', '.join(labels.values())}): {examples}")
            checked = [(r.item_id, r.input_json, labels[r.expected.casefold()]) for r in rows]
        if len({r[0] for r in checked}) < len(checked):
            dupes = [i for i, n in Counter(r[0] for r in checked).items() if n > 1]
            raise DatasetError(f"dataset {run.dataset_name}: duplicate item ids: {', '.join(dupes[:EXAMPLES])}")
        return checked

    def _precheck_templates(self, run: Run, templates: list[str], rows) -> None:
        """Render the templates over the first rows: a template over its budget ends the
        run now, before any model call. Other template problems are the items' own (they
        show on each item)."""
        for item_id, input_json, _ in rows[:PRECHECK_ROWS]:
            try:
                self.renderer.render(templates, json.loads(input_json))
            except BudgetExceeded as exc:
                raise DatasetError(f"dataset {run.dataset_name}: item {item_id}: {exc}; the run was stopped "
                                   "before any model call") from None
            except TemplateProblem:
                continue

    def write_page(self, run: Run, token: str, rows, cursor, digest, version, first: bool, before) -> None:
        """One page's transaction: the items, then (once the page before it has committed)
        the cursor. ``before`` is that page's future (None for the first page in flight).
        ``transaction`` runs it again after a deadlock or a lost connection; a second run
        first asks whether the first one committed after all (a COMMIT lost in flight)."""
        runs = itertools.count()

        def commit(conn) -> None:
            if next(runs) and store.page_committed(conn, run.id, cursor):
                return   # in already: inserting it again would fail on its own item ids
            if first:   # the first page moves the update and the run to RUNNING
                self._ensure_running(conn, run, token)
            store.insert_items(conn, run.id, rows)
            if before is not None:
                before.result()   # its failure is this page's: roll back, the cursor stays put
            if not store.advance_materialize(conn, run.id, token, cursor=cursor, added_rows=len(rows),
                                             content_hash=digest, source_version=version,
                                             lease_seconds=self.settings.lease_seconds):
                raise LeaseLost
            if cursor is None and not store.finish_materialize(conn, run.id, token):
                raise LeaseLost
        try:
            transaction(self.engine, commit)
        except IntegrityError:
            # UNIQUE (run_id, item_id): an id of this page is in a committed page already
            with self.engine.connect() as conn:
                dupes = store.existing_item_ids(conn, run.id, [r[0] for r in rows])
            raise DatasetError(f"dataset {run.dataset_name}: duplicate item ids: "
                               f"{', '.join(dupes[:EXAMPLES]) or '(see the dataset)'}") from None
        self.nudge("execute")

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


def next_page_size(rows: list[Row], page_size: int, page_bytes: int) -> int:
    """Rows for the next page: ``page_size``, or fewer when rows like these would make it
    hold more than ``page_bytes`` of row data. Big pages cost fewer statements and commits
    per row (5,000 rows materialized ~20 % faster than 1,000 here); the byte bound keeps a
    page of wide rows (up to 64 KiB each) from holding gigabytes, with three pages in
    memory at once (one read, two being written)."""
    if not rows:
        return page_size
    row_bytes = sum(len(r.input_json) + len(r.item_id) + len(r.expected) for r in rows) // len(rows)
    return max(1, min(page_size, page_bytes // max(1, row_bytes)))


class PageWriter:
    """Writes a run's pages on ``WRITERS`` threads, committing them in order (see the
    module docstring). Leaving the block waits for every page in flight; the first error
    of any page is raised."""

    def __init__(self, write_page, writers: int, run: Run, token: str, version: str):
        """``write_page(run, token, rows, cursor, digest, version, first, before)`` commits
        one page; ``writers`` threads write (one on SQLite, see below)."""
        self.write_page, self.run, self.token, self.version = write_page, run, token, version
        self.writers = writers
        self.pool = ThreadPoolExecutor(self.writers, thread_name_prefix="page-writer")
        self.in_flight: deque[tuple[Future, set[str]]] = deque()
        self.first_in_flight = False

    def submit(self, rows, cursor, digest, first: bool) -> None:
        """Queue a page; its writer inserts it, then waits for the page before it to commit.
        A run's first page is written alone: execution waits for it, and a second page
        written alongside delayed its commit (bench/README.md); the next page is read
        meanwhile."""
        ids = {r[0] for r in rows}
        if self.first_in_flight:
            self.wait()
            self.first_in_flight = False
        while len(self.in_flight) >= self.writers:
            self.in_flight.popleft()[0].result()
        dupes = sorted(set().union(*(held & ids for _, held in self.in_flight)))
        if dupes:
            raise DatasetError(f"dataset {self.run.dataset_name}: duplicate item ids: {', '.join(dupes[:EXAMPLES])}")
        before = self.in_flight[-1][0] if self.in_flight else None
        future = self.pool.submit(self.write_page, self.run, self.token, rows, cursor, digest, self.version,
                                  first, before)
        self.in_flight.append((future, ids))
        self.first_in_flight = first

    def wait(self) -> None:
        while self.in_flight:
            self.in_flight.popleft()[0].result()

    def __enter__(self) -> "PageWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.wait()
            else:   # already failing: let the pages in flight end (commit or roll back), keep that error
                for future, _ in self.in_flight:
                    try:
                        future.result()
                    except Exception:
                        pass
        finally:
            self.pool.shutdown(wait=True)
