"""``promptgate dataset preview``: the first rows, the row count and the label counts of a
source, read through the same reader the materialize worker uses, page by page (memory
grows with the number of distinct labels, not with the rows)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import Reader, Row

PREVIEW_PAGE_SIZE = 1000


@dataclass(frozen=True)
class DatasetPreview:
    first_rows: list[Row]
    row_count: int
    label_counts: dict[str, int]              # most frequent first
    snapshot_version: str | None = field(default=None)


def preview(reader: Reader, rows: int = 10, *, page_size: int = PREVIEW_PAGE_SIZE,
            with_version: bool = True) -> DatasetPreview:
    """Read the whole source once. Raises ``DatasetError`` on the first row that breaks the
    row contract (the same error materialize would end the run with). Duplicate ids are
    not checked here: that needs memory in the number of rows; materialize checks them."""
    version = reader.snapshot_version() if with_version else None
    first: list[Row] = []
    counts: dict[str, int] = {}
    total = 0
    cursor = None
    while True:
        page = reader.read_page(cursor, page_size)
        for row in page.rows:
            if len(first) < rows:
                first.append(row)
            counts[row.expected] = counts.get(row.expected, 0) + 1
        total += len(page.rows)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    ordered = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return DatasetPreview(first, total, ordered, version)
