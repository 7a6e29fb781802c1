"""A source's rows as an import reads them, with no database: pages sized by bytes
(``read_pages``), the bytes a version would store (``StoredBytes``), and what an import
checks and counts page by page (``RowTally``: duplicate ids, the expected objects, labels,
item fields, protected rows). The importer writes what these read; ``check_rows`` reads a
source to the end the same way and writes nothing — what a pull request's dry run and
`sync --dry-run` run on each dataset file, so a file the import would refuse fails there
first, with the importer's own words (issue 35.4)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from gate.errors import DatasetError
from gate.prompt.structured.expected_calls import CallsSummary, function_of
from gate.prompt.structured.summary import ExpectedSummary
from gate.records import EXAMPLES

from .field_counts import FieldCounter
from .sources import DEFAULT_MAX_ROW_BYTES, ContentHash, Reader, Row, first_page_size, next_page_size, row_digests

MAX_VERSION_BYTES_SETTING = "PROMPTGATE_MAX_VERSION_BYTES"


class StoredBytes:
    """What a version's rows store (ids, labels, inputs, in UTF-8 bytes), counted page by
    page: a DatasetError naming the setting once past ``limit`` (None: no limit)."""

    def __init__(self, name: str, limit: int | None):
        self.name, self.limit, self.total = name, limit, 0

    def add(self, rows: list[Row]) -> None:
        if self.limit is None:
            return
        self.total += _utf8_bytes(rows)
        if self.total > self.limit:
            raise DatasetError(
                f"dataset {self.name}: its rows come to more than {self.limit} bytes as stored (at "
                f"{rows[-1].position}), over {MAX_VERSION_BYTES_SETTING}, the cap on one version: nothing was stored"
            )


def _utf8_bytes(rows: list[Row]) -> int:
    """The rows' ids, labels and inputs in UTF-8 bytes (a join per page: ~80 ns a row)."""
    inputs, keys = "".join([r.input_json for r in rows]), "".join([r.item_id + r.expected for r in rows])
    return sum(len(t) if t.isascii() else len(t.encode()) for t in (inputs, keys))


def read_pages(
    reader: Reader,
    page_size: int,
    page_bytes: int,
    max_row_bytes: int = DEFAULT_MAX_ROW_BYTES,
    stored: StoredBytes | None = None,
) -> Iterator[list[Row]]:
    """The source's rows a page at a time, pages sized by bytes: the first by the widest a
    row may be, the others by the rows read so far; each page counted into ``stored``."""
    cursor, size = None, first_page_size(page_size, page_bytes, max_row_bytes)
    while True:
        page = reader.read_page(cursor, size)
        if page.rows:
            if stored is not None:
                stored.add(page.rows)
            yield page.rows
        if page.next_cursor is None:
            return
        cursor = page.next_cursor
        size = next_page_size(page.rows, page_size, page_bytes)


class RowTally:
    """What an import checks and counts, page by page: no item id twice in a page (across
    pages the database's unique key says it), the expected objects and tool calls
    consistent, and the content hash, labels, item fields and protected rows of the version."""

    def __init__(self, name: str):
        self.name = name
        self.labels: Counter[str]
        self.digest, self.labels, self.fields, self.rows = ContentHash(), Counter(), FieldCounter(), 0
        self.expected, self.protected, self.calls = ExpectedSummary(name), 0, CallsSummary()

    def add(self, page: list[Row]) -> list:
        """Check and count a page; returns its rows' digests."""
        ids = [r.item_id for r in page]
        if len(set(ids)) < len(ids):
            self.duplicates([i for i, n in Counter(ids).items() if n > 1])
        digests = row_digests(page)
        self.digest.update(digests)
        for r in page:
            self.fields.add(r.input)
            self.expected.add(r.item_id, r.position, r.expected, r.structured)
            self.calls.add(r.position, r.expected, r.call, f"dataset {self.name}: {r.position}: item {r.item_id}")
            self.protected += r.protected
        if not page[0].structured and page[0].expected:  # an object per row, or no label: none to count
            self.labels.update(function_of(r.expected) if r.call else r.expected for r in page)
        self.rows += len(page)
        return digests

    def duplicates(self, dupes: list[str]) -> None:
        raise DatasetError(
            f"dataset {self.name}: duplicate item ids: {', '.join(dupes[:EXAMPLES]) or '(see the dataset)'}"
        )

    def check_not_empty(self) -> None:
        if not self.rows:
            raise DatasetError(f"dataset {self.name} has no rows: nothing to evaluate")


def check_rows(
    name: str,
    reader: Reader,
    page_size: int,
    page_bytes: int,
    max_row_bytes: int = DEFAULT_MAX_ROW_BYTES,
    max_version_bytes: int | None = None,
) -> RowTally:
    """Read the source to the end as an import would and check what it checks (the row
    contract and limits, duplicate ids across the whole file, the expected objects, no
    rows); nothing is stored. Its tally, or the import's DatasetError."""
    seen: set[str]
    tally, seen = RowTally(name), set()
    for page in read_pages(reader, page_size, page_bytes, max_row_bytes, StoredBytes(name, max_version_bytes)):
        tally.add(page)
        again = [r.item_id for r in page if r.item_id in seen]
        if again:
            tally.duplicates(again)
        seen.update(r.item_id for r in page)
    tally.check_not_empty()
    return tally
