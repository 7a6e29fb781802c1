"""Materialize: copy a run's pinned dataset version into prompt_run_item, page by page
after a cursor.

The rows were imported into the gate when the dataset was registered or refreshed
(``gate.datasets.importer``): a run never reads a source, a pull request's files or a path on any
machine, so any worker anywhere runs any dataset. Each page is one server-side
``INSERT ... SELECT`` of a range of the version's positions plus the cursor advance (guarded
by the lease token, which also renews the lease), in one transaction: a worker killed
mid-page leaves nothing and the next lease copies the page again. Items point at their row
(``position``) rather than copying its input. The first page moves the run (and its
update) to RUNNING, so execution starts while later pages are still being copied; it is
short (``FIRST_PAGE_ROWS``) for that reason.

Before the first page, the version's labels are checked against the prompt's (one GROUP BY
over the version; a label spelled in another case is mapped to the prompt's spelling in
the copy) and the candidate's templates are rendered over its first ``PRECHECK_ROWS`` rows
through the template sandbox: a template that exceeds its budget there (a CPU or memory
bomb) ends the run in ERROR before any item exists or any model is called. Such a run's
reason names no row (``gate.verdict.reasons``): the rows go to its metrics' item detail.

A run whose update stopped (early stop, a spend cap: its ``stopped`` set) gets no further
page: the cursor's advance is guarded by it, and the run is marked materialized as it is.
"""

from __future__ import annotations

import itertools
import logging

from gate.datasets.readability import version_readable
from gate.db import transaction
from gate.errors import DatasetError, IllegalTransition, first_line
from gate.kinds import kind_of
from gate.prompt.sandbox import BudgetExceeded, RenderBudget, RenderPool
from gate.prompt.structured.summary import RuleMisfit
from gate.prompt.templating import TemplateProblem
from gate.records import DatasetVersion, Run
from gate.states import RunStatus
from gate.store.items import copy_version_page
from gate.store.runs import (
    advance_materialize,
    candidate_of_run,
    claim_materialize,
    finish_materialize,
    get_run,
    page_committed,
    release_run_lease,
    transition_run,
)
from gate.store.stops import run_stopped
from gate.store.updates import start_update
from gate.store.versions import READY, get_version, rows_with_labels, version_rows
from gate.verdict.reasons import DETAIL_CHARS, ITEM_DETAIL, first_error_detail, unknown_labels_reason
from workers.poller import Poller

log = logging.getLogger("promptgate.materialize")
EXAMPLES = 3
FIRST_PAGE_ROWS = 128
PRECHECK_ROWS = 3


class LeaseLost(Exception):
    pass


class ItemDetailError(DatasetError):
    """A run's end whose reason names no item (any reader of the update sees it) and whose
    ``detail`` does (the run's metrics' item detail: admin, or a reader of the dataset's rows)."""

    def __init__(self, reason: str, detail: dict):
        super().__init__(reason)
        self.detail = detail


class Materializer(Poller):
    role = "materialize"

    def __init__(self, engine, settings, stop, activity=None, renderer: RenderPool | None = None):
        super().__init__(engine, settings, stop, activity)
        self.owns_renderer = renderer is None
        self.renderer = renderer or RenderPool(RenderBudget.from_settings(self.settings))

    def close(self) -> None:
        if self.owns_renderer:
            self.renderer.close()

    def poll(self) -> float:
        claimed = transaction(
            self.engine, lambda conn: claim_materialize(conn, self.settings.lease_seconds, 1), wrote=bool
        )
        if not claimed:
            return self.idle()
        run, token = claimed[0]
        self.materialize(run, token)
        return self.busy()

    def materialize(self, run: Run, token: str) -> None:
        try:
            if run.stopped:
                raise LeaseLost
            self._copy_all_pages(run, token)
        except DatasetError as exc:
            self._fail(run, token, str(exc), getattr(exc, "detail", None))
        except LeaseLost:
            if self._stopped(run):
                self._finish_stopped(run, token)
            elif self.stop.is_set():
                self._give_back(run, token)
            else:
                log.warning("run %s: lease lost while materializing; another worker continues", run.id)

    def _stopped(self, run: Run) -> bool:
        with self.engine.connect() as conn:
            return run_stopped(conn, run.id)

    def _finish_stopped(self, run: Run, token: str) -> None:
        """A run whose update stopped (settled early, or at its spend cap) gets no further
        page: its rows not copied yet are never called. It is marked materialized (a
        RUNNING one was, by the stop itself) so that finalize ends it."""

        def finish(conn) -> None:
            self._ensure_running(conn, run, token)
            finish_materialize(conn, run.id, token)

        try:
            transaction(self.engine, finish)
            log.info("run %s: stopped with its update; no further page", run.id)
        except (IllegalTransition, LeaseLost):
            pass  # finished by the stop itself, or the update was cancelled

    def _give_back(self, run: Run, token: str) -> None:
        """Draining: the run's lease goes back now (guarded by its token), so another worker
        copies the next page at once rather than after the lease."""
        try:
            transaction(self.engine, lambda conn: release_run_lease(conn, run.id, token))
            log.info("run %s: draining; its materialize lease is given back", run.id)
        except Exception as exc:  # the lease runs out instead
            log.warning("run %s: could not give back its lease: %s", run.id, first_line(exc))

    def _copy_all_pages(self, run: Run, token: str) -> None:
        if run.dataset_version_id is None:
            raise DatasetError(
                f"dataset {run.dataset_name}: this run was submitted before datasets were stored in "
                "the gate; submit the prompt again"
            )
        with self.engine.connect() as conn:
            config = candidate_of_run(conn, run.id).config
            version = get_version(conn, run.dataset_version_id)
        if version.status != READY:
            raise DatasetError(f"dataset {run.dataset_name}: pinned version {version.id} is {version.status}")
        if not version.row_count:
            raise DatasetError(f"dataset {run.dataset_name} has no rows: nothing to score")
        labels = self._expected_map(run, version, config)
        start = int(run.materialize_cursor or 0)
        if start == 0:
            templates = [m["content"] for m in config["messages"] if "history" not in m]  # not a conversation entry
            self._precheck_templates(run, version, templates)
        size = (
            min(self.settings.page_size, FIRST_PAGE_ROWS)
            if run.status == RunStatus.PENDING
            else self.settings.page_size
        )
        while start < version.row_count:
            if self.stop.is_set():
                raise LeaseLost  # draining: leave the rest to the next lease
            end = min(start + size, version.row_count)
            self.copy_page(run, token, version, start, end, labels, first=run.status == RunStatus.PENDING and not start)
            start, size = end, self.settings.page_size

    def _expected_map(self, run: Run, version: DatasetVersion, config: dict) -> dict[str, str]:
        """The version's rows give what the prompt's decision reads (labels, or expected
        objects with its fields: checked at submit, and again here, since the run's end
        rests on it); for labels, the label map of the copy (``_label_map``). A judged
        prompt's rows need no label of its own (gate/prompt/judge.py)."""
        kind = kind_of(config.get("decision"))
        try:
            kind.check_rows(kind.fields_rule(config.get("decision")), version.fields, run.dataset_name)
        except RuleMisfit as exc:
            if version_readable(None, version):
                raise DatasetError(str(exc)) from None
            raise ItemDetailError(exc.withheld, {"misfit": str(exc)[:DETAIL_CHARS]}) from None  # a holdout's fields
        if not kind.maps_row_labels(config.get("decision")):  # fields; a judge reads the answers
            return {}
        return self._label_map(run, version, config.get("labels") or [])

    def _label_map(self, run: Run, version: DatasetVersion, prompt_labels: list[str]) -> dict[str, str]:
        """The version's labels in the prompt's spelling (labels compare case-insensitively):
        the ones that differ, for the copy to map. A label the prompt does not have ends the
        run: its reason says how many rows and labels, the labels and example rows go to
        the item detail (a holdout's labels are its values: ``gate.verdict.reasons``)."""
        known = {label.casefold(): label for label in prompt_labels}
        unknown = [label for label in version.labels if label.casefold() not in known]
        if unknown:
            with self.engine.connect() as conn:
                rows = rows_with_labels(conn, version.id, unknown, EXAMPLES)
            count = sum(version.labels[label] for label in unknown)
            raise ItemDetailError(
                unknown_labels_reason(run.dataset_name, count, len(unknown), prompt_labels),
                {
                    "unknown_labels": {label[:DETAIL_CHARS]: version.labels[label] for label in sorted(unknown)[:20]},
                    "examples": [{"item_id": r.item_id, "expected": r.expected} for r in rows],
                },
            )
        return {label: known[label.casefold()] for label in version.labels if known[label.casefold()] != label}

    def _precheck_templates(self, run: Run, version: DatasetVersion, templates: list[str]) -> None:
        """Render the templates over the first rows: a template over its budget ends the
        run now, before any model call (which row, in the item detail). Other template
        problems are the items' own (they show on each item)."""
        with self.engine.connect() as conn:
            rows = version_rows(conn, version.id, -1, PRECHECK_ROWS)
        for row in rows:
            try:
                self.renderer.render(templates, row.input)
            except BudgetExceeded as exc:
                raise ItemDetailError(
                    f"dataset {run.dataset_name}: {exc} on one of its first {PRECHECK_ROWS} rows; the run was "
                    "stopped before any model call",
                    first_error_detail(row.item_id, str(exc)),
                ) from None
            except TemplateProblem:
                continue

    def copy_page(
        self, run: Run, token: str, version: DatasetVersion, start: int, end: int, labels: dict[str, str], first: bool
    ) -> None:
        """One page's transaction: the items of positions [start, end), then the cursor.
        ``transaction`` runs it again after a deadlock or a lost connection; a second run
        first asks whether the first one committed after all (a COMMIT lost in flight)."""
        last = end >= version.row_count
        cursor = None if last else str(end)
        runs = itertools.count()

        def commit(conn) -> None:
            if next(runs) and page_committed(conn, run.id, cursor):
                return  # in already: copying it again would fail on (run_id, position)
            if first:  # the first page moves the update and the run to RUNNING
                self._ensure_running(conn, run, token)
            copied = copy_version_page(conn, run.id, version.id, start, end, labels)
            if copied != end - start:  # the pinned rows are not all there: never judge on part of them
                raise DatasetError(
                    f"dataset {run.dataset_name}: version {version.id} is missing rows "
                    f"{start}..{end - 1} ({copied} of {end - start} found)"
                )
            if not advance_materialize(
                conn, run.id, token, cursor=cursor, added_rows=copied, lease_seconds=self.settings.lease_seconds
            ):
                raise LeaseLost
            if last and not finish_materialize(conn, run.id, token):
                raise LeaseLost

        transaction(self.engine, commit)
        self.nudge("execute")

    def _ensure_running(self, conn, run: Run, token: str) -> None:
        """Update first, then run: the lock order of cancel and submit, so a page commit
        and a cancellation cannot deadlock. A cancelled update stops the page."""
        if not start_update(conn, run.update_id):
            raise LeaseLost
        status = get_run(conn, run.id).status
        if status == RunStatus.PENDING:
            transition_run(conn, run.id, RunStatus.RUNNING, token=token)
        elif status != RunStatus.RUNNING:
            raise LeaseLost

    def _fail(self, run: Run, token: str, reason: str, detail: dict | None = None) -> None:
        """End the run in ERROR (through RUNNING, as the state machine goes) and release it;
        ``detail``: what the reason leaves out (``gate.verdict.reasons``), kept in its metrics."""
        log.info("run %s: %s", run.id, reason)
        metrics = {ITEM_DETAIL: detail} if detail else None

        def fail(conn) -> None:
            self._ensure_running(conn, run, token)
            transition_run(conn, run.id, RunStatus.ERROR, reason=reason[:2000], metrics=metrics, token=token)

        try:
            transaction(self.engine, fail)
        except (IllegalTransition, LeaseLost):
            log.warning("run %s: could not record the error (lease lost or run cancelled)", run.id)
