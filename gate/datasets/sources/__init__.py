"""Dataset sources: one reader interface, one module per kind of source.

A reader reads a dataset page by page after a cursor (an opaque string it made itself),
so a dataset of any size costs constant memory, and a page that was read but never
committed is simply read again. Adding a source is one module that defines a reader
class and registers its URI schemes in ``SCHEMES``.

Row contract: every row has an item id and an expected decision (column names per
dataset, default ``item_id`` and ``expected_decision``); every other column goes into the
item's ``input``, which prompt templates see as ``item.<column>``. A row is at most
``max_row_bytes`` as JSON and nested at most ``MAX_ROW_DEPTH`` levels (a JSONL row of
20,000 ``[`` is 40 KB: it is refused by name, not left to a RecursionError).
"""

from __future__ import annotations

from gate.errors import DatasetError

from .base import (
    DEFAULT_ID_COLUMN,
    DEFAULT_LABEL_COLUMN,
    DEFAULT_MAX_ROW_BYTES,
    MAX_ROW_DEPTH,
    SCHEMES,
    ContentHash,
    Page,
    Reader,
    Row,
    SourceOptions,
    absolute_source,
    canonical_json,
    content_hash,
    first_page_size,
    json_quote,
    make_row,
    nesting_depth,
    next_page_size,
    register,
    resolve_path,
    row_digests,
    scheme_of,
    shown_source,
)


def open_source(uri: str, options: SourceOptions | None = None) -> Reader:
    """Open the reader for a source URI (a bare path is a local file)."""
    load_readers()
    options = options or SourceOptions()
    scheme = scheme_of(uri)
    factory = SCHEMES.get(scheme) or SCHEMES.get(scheme.split("+")[0])
    if factory is None:
        raise DatasetError(f"{uri}: unsupported source kind {scheme!r}; known: {', '.join(sorted(SCHEMES))}")
    return factory(uri, options)


def load_readers() -> None:
    """Import the built-in reader modules (those whose optional extras are installed)."""
    from . import files, upload  # noqa: F401  (registers file://, upload://)

    for optional in ("http", "s3", "warehouse"):
        try:
            __import__(f"{__name__}.{optional}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{optional}":
                raise


__all__ = [
    "DEFAULT_ID_COLUMN",
    "DEFAULT_LABEL_COLUMN",
    "DEFAULT_MAX_ROW_BYTES",
    "MAX_ROW_DEPTH",
    "SCHEMES",
    "Page",
    "Reader",
    "Row",
    "SourceOptions",
    "absolute_source",
    "canonical_json",
    "ContentHash",
    "content_hash",
    "first_page_size",
    "json_quote",
    "load_readers",
    "make_row",
    "nesting_depth",
    "next_page_size",
    "open_source",
    "register",
    "resolve_path",
    "row_digests",
    "scheme_of",
    "shown_source",
]
