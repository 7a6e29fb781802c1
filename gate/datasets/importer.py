"""Importing a dataset source into the gate as a version, and comparing rows with a version.

``import_version`` reads the source page by page through its reader (the row contract,
the size and depth limits), writes each page of rows into ``dataset_row`` on its own
connection and transaction (two writers while the next page is read; one on SQLite), and
hashes the rows' digests in order into the content hash. Only then is the version READY; if the
dataset already has a READY version with that content, the new one is discarded and the
existing one returned, so importing identical content creates no new version. A failure
half-way discards what was written: a version is whole or absent. Pages are sized by bytes
(``read_pages``), the first one too, and a version stores at most ``max_version_bytes``
of rows (``StoredBytes``): a CSV header repeated into every row cannot fill the database.

``diff_ordered`` (two versions, streamed by item id) and ``diff_against`` (a proposed file
against a version) compare rows: added, removed and relabelled items, and items whose
input changed; neither holds a whole version in memory.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from gate.db import is_sqlite, transaction
from gate.errors import DatasetError
from gate.prompt.structured.expected_calls import CallsSummary
from gate.prompt.structured.summary import ExpectedSummary
from gate.records import EXAMPLES, DataDiff, Imported  # noqa: F401 (DataDiff: its old path)
from gate.store import versions
from gate.store.versions import (
    create_version,
    delete_version,
    delete_version_rows,
    existing_version_ids,
    find_version_by_content,
    finish_version,
    get_version,
    insert_version_rows,
    lock_dataset,
    version_rows,
)

from .field_counts import FieldCounter
from .rows import MAX_VERSION_BYTES_SETTING, RowTally, StoredBytes, read_pages
from .sources import DEFAULT_MAX_ROW_BYTES, Reader, Row, row_digests

WRITERS = 2
DELETE_BATCH = 5000
HELD_LABEL = 191  # characters of a label a diff holds whole


def import_version(
    engine: Engine,
    dataset_id: int,
    name: str,
    source_uri: str,
    options: dict,
    reader: Reader,
    page_size: int,
    page_bytes: int,
    *,
    max_row_bytes: int = DEFAULT_MAX_ROW_BYTES,
    max_version_bytes: int | None = None,
) -> Imported:
    """The source's rows as a READY version of the dataset (see the module docstring)."""
    source_version = reader.snapshot_version()
    version_id = transaction(engine, lambda conn: create_version(conn, dataset_id, source_uri, options, source_version))
    try:
        pages = read_pages(reader, page_size, page_bytes, max_row_bytes, StoredBytes(name, max_version_bytes))
        content_hash, rows, labels, fields = _write_rows(engine, version_id, name, pages)
        if not rows:
            raise DatasetError(f"dataset {name} has no rows: nothing to evaluate")
        return _finish(engine, dataset_id, version_id, content_hash, rows, labels, fields)
    except BaseException:
        discard_version(engine, version_id)
        raise


def _write_rows(
    engine: Engine, version_id: int, name: str, pages: Iterable[list[Row]]
) -> tuple[str, int, dict[str, int], dict]:
    tally, position = RowTally(name), 0
    with _Writers(engine, version_id, name) as writers:
        for page in pages:
            digests = tally.add(page)
            writers.submit(
                [
                    (position + k, r.item_id, r.expected, r.input_json, d.hex(), int(r.protected))
                    for k, (r, d) in enumerate(zip(page, digests))
                ]
            )
            position += len(page)
    return (
        tally.digest.hexdigest(),
        position,
        dict(tally.labels),
        _version_fields(tally.fields, tally.expected, tally.protected, tally.calls),
    )


def _version_fields(fields: FieldCounter, expected: ExpectedSummary, protected: int, calls: CallsSummary) -> dict:
    """What is stored as ``dataset_version.fields``: the item fields (``gate.datasets.field_counts``)
    and, where the rows have them, the summary of their expected objects
    (``gate.prompt.structured.summary``) or tool calls (``...expected_calls``) and how many
    rows are protected."""
    out = fields.to_json()
    summary = expected.to_json()
    if summary is not None:
        out["expected"] = summary
    if calls.to_json() is not None:
        out["calls"] = calls.to_json()
    if protected:
        out["protected"] = protected
    if expected.unlabelled:  # no row gives a label: only a judged prompt may be gated on it
        out["unlabelled"] = True
    return out


class _Writers:
    """Pages written on their own connections while the next is read; the first error is
    raised (a duplicate id across pages is the unique index's IntegrityError)."""

    def __init__(self, engine: Engine, version_id: int, name: str):
        self.engine, self.version_id, self.name = engine, version_id, name
        self.count = 1 if is_sqlite(engine) else WRITERS
        self.pool = ThreadPoolExecutor(self.count, thread_name_prefix="import-writer")
        self.in_flight: list[Future] = []

    def submit(self, rows) -> None:
        while len(self.in_flight) >= self.count:
            self.in_flight.pop(0).result()
        self.in_flight.append(self.pool.submit(self._write, rows))

    def _write(self, rows) -> None:
        try:
            transaction(self.engine, lambda conn: insert_version_rows(conn, self.version_id, rows))
        except IntegrityError:
            with self.engine.connect() as conn:
                dupes = existing_version_ids(conn, self.version_id, [r[1] for r in rows])
            raise DatasetError(
                f"dataset {self.name}: duplicate item ids: {', '.join(dupes[:EXAMPLES]) or '(see the dataset)'}"
            ) from None

    def __enter__(self) -> _Writers:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            for future in self.in_flight:
                if exc_type is None:
                    future.result()
                else:  # failing already: let the pages end, keep that error
                    future.exception()
        finally:
            self.pool.shutdown(wait=True)


def _finish(
    engine: Engine, dataset_id: int, version_id: int, content_hash: str, rows: int, labels: dict[str, int], fields: dict
) -> Imported:
    def finish(conn) -> Imported:
        lock_dataset(conn, dataset_id)  # the number: the dataset's next, one at a time
        existing = find_version_by_content(conn, dataset_id, content_hash)
        if existing is not None:
            return Imported(existing, created=False)
        if not finish_version(conn, version_id, dataset_id, content_hash, rows, labels, fields):
            raise DatasetError("the import was taken away while it ran (a prune of stale imports?): run it again")
        return Imported(get_version(conn, version_id), created=True)

    try:
        imported = transaction(engine, finish)
    except IntegrityError:  # the same content went READY meanwhile, by another import
        imported = transaction(engine, finish)
    if not imported.created:
        discard_version(engine, version_id)
    return imported


def discard_version(engine: Engine, version_id: int, batch: int = DELETE_BATCH) -> None:
    """Delete a version's rows in bounded batches, then the version."""
    while transaction(engine, lambda conn: delete_version_rows(conn, version_id, batch)):
        pass
    transaction(engine, lambda conn: delete_version(conn, version_id))


# --- diffs (``DataDiff``, in gate.records: the service's client decodes it too) ------------------


def count_fields(engine: Engine, version_id: int, page: int = 1000) -> dict:
    """The fields of a stored version's rows (``gate.datasets.field_counts``), read page by page:
    for a version imported before the gate counted them at import."""
    counter, after = FieldCounter(), -1
    while True:
        with engine.connect() as conn:
            rows = version_rows(conn, version_id, after, page)
        for row in rows:
            counter.add(row.input)
        if len(rows) < page:
            return counter.to_json()
        after = rows[-1].position


def version_keys(engine: Engine, version_id: int, page: int = 10000) -> Iterator[tuple[str, str, str]]:
    """(item_id, label, row hash) of a stored version in item-id order, page by page."""
    after = None
    while True:
        with engine.connect() as conn:
            rows = versions.version_keys(conn, version_id, after, page)
        yield from rows
        if len(rows) < page:
            return
        after = rows[-1][0]


def diff_ordered(base: Iterable[tuple[str, str, str]], proposed: Iterable[tuple[str, str, str]]) -> DataDiff:
    """Two row streams, each in item-id order, merged in constant memory (two versions)."""
    result, base, proposed = DataDiff(), iter(base), iter(proposed)
    old, new = next(base, None), next(proposed, None)
    while old is not None or new is not None:
        if new is not None and (old is None or new[0] < old[0]):
            result.rows += 1
            result.note("added", f"{new[0]} ({new[1]})")
            new = next(proposed, None)
        elif old is not None and (new is None or old[0] < new[0]):
            result.note("removed", f"{old[0]} ({old[1]})")
            old = next(base, None)
        else:
            assert old is not None and new is not None  # neither ran out first: the same id in both
            result.rows += 1
            _compare(result, old, new)
            old, new = next(base, None), next(proposed, None)
    return result


def diff_against(engine: Engine, version_id: int, rows: Iterable[tuple[str, str, str]], max_rows: int) -> DataDiff:
    """Rows from elsewhere (a pull request's copy of a file, in file order) against a
    stored version: the proposed rows are held (at most ``max_rows``: beyond that the diff
    says it is too large), the version streamed by item id. A long label is held by its
    digest (``held_label``): the rows held cost their ids, not the file's size."""
    proposed: dict[str, tuple[str, str]] = {}
    for item_id, label, row_hash in rows:
        if len(proposed) >= max_rows:
            return DataDiff(too_large=max_rows)
        proposed[item_id] = (held_label(label), row_hash)
    result = DataDiff(rows=len(proposed))
    for old in version_keys(engine, version_id):
        new = proposed.pop(old[0], None)
        if new is None:
            result.note("removed", f"{old[0]} ({held_label(old[1])})")
        else:
            _compare(result, (old[0], held_label(old[1]), old[2]), (old[0], *new))
    for item_id, (label, _) in proposed.items():
        result.note("added", f"{item_id} ({label})")
    return result


def held_label(label: str) -> str:
    """A label as a diff holds and shows it: itself, or when over ``HELD_LABEL`` characters
    its start and a digest of the whole (equal labels stay equal; a hostile file of 4 KB
    labels held each one whole: +63 MiB of the server's RSS for a 48 MiB dry run)."""
    if len(label) <= HELD_LABEL:
        return label
    return f"{label[:64]}… (sha256 {hashlib.sha256(label.encode()).hexdigest()[:32]})"


def _compare(result: DataDiff, old: tuple[str, str, str], new: tuple[str, str, str]) -> None:
    if old[1] != new[1]:
        result.note("relabelled", f"{old[0]}: {old[1]} → {new[1]}")
    elif old[2] != new[2]:
        result.note("changed", old[0])


def source_rows(
    reader: Reader,
    page_size: int,
    page_bytes: int,
    max_row_bytes: int = DEFAULT_MAX_ROW_BYTES,
    stored: StoredBytes | None = None,
) -> Iterator[tuple[str, str, str]]:
    """(item_id, label, row hash) of a source's rows, for ``diff_against``; ``stored``: the
    rows an import would store, bounded as there (a dry run reads no more than it would)."""
    for page in read_pages(reader, page_size, page_bytes, max_row_bytes, stored):
        for row, digest in zip(page, row_digests(page)):
            yield row.item_id, row.expected, digest.hex()


__all__ = [
    "MAX_VERSION_BYTES_SETTING",
    "DataDiff",
    "Imported",
    "StoredBytes",
    "count_fields",
    "diff_against",
    "diff_ordered",
    "discard_version",
    "import_version",
    "read_pages",
    "source_rows",
    "version_keys",
]
