"""What every dataset reader shares: the row contract (``make_row``), rows and pages, the
reader protocol and the registry of URI schemes, the canonical row JSON and the content
hash. ``gate.datasets.sources`` re-exports all of it and opens readers (``open_source``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from gate.errors import DatasetError
from gate.prompt.conversation import is_conversation_field
from gate.prompt.structured.expected import (
    EXPECTED_COLUMN,
    EXPECTED_PREFIX,
    PROTECTED_COLUMN,
    checked_expected,
    expected_object,
    protected_flag,
)
from gate.prompt.structured.expected_calls import expected_calls

from ..conversations import checked_conversations

DEFAULT_ID_COLUMN = "item_id"
DEFAULT_LABEL_COLUMN = "expected_decision"
DEFAULT_MAX_ROW_BYTES = 65536
DEFAULT_PAGE_BYTES = 4 * 1024 * 1024  # Settings.page_bytes
MAX_ROW_DEPTH = 32


@dataclass(slots=True)
class Row:
    item_id: str
    expected: str
    input_json: str  # the other columns as canonical JSON: stored, hashed and size-checked as is
    position: str  # where the row stands in the source ("line 12"), for messages
    structured: bool = False  # ``expected`` is an expected object's canonical JSON (gate.prompt.structured)
    protected: bool = False  # the row's ``protected`` column: it may never break (gate.verdict.item_policy)
    call: bool = False  # ``expected`` is an expected tool call with arguments (gate.prompt.structured.expected_calls)

    @property
    def input(self) -> dict[str, Any]:
        """The other columns, as a prompt template sees them (decoded from the stored form)."""
        return json.loads(self.input_json)


@dataclass(frozen=True)
class Page:
    rows: list[Row]
    next_cursor: str | None  # None: this was the last page


@dataclass(frozen=True)
class SourceOptions:
    id_column: str = DEFAULT_ID_COLUMN
    label_column: str = DEFAULT_LABEL_COLUMN
    max_row_bytes: int = DEFAULT_MAX_ROW_BYTES
    page_bytes: int = DEFAULT_PAGE_BYTES  # a text page ends once its rows come to about this much (files.py)
    base_dir: str | None = None  # relative file paths resolve here (the gate config's folder)
    declared_in: str | None = None  # the gate config that declared the dataset (not read by a reader)
    extra: dict[str, Any] = field(default_factory=dict)
    # The service reads sources for callers: no ${VAR} filled in from the server's
    # environment, and connections only where the operator's policy (``egress.Egress``)
    # allows. The CLI on the database keeps both (None: connect anywhere).
    expand_env: bool = True
    egress: Any = None


class Reader(Protocol):
    def snapshot_version(self) -> str:
        """The source's version: file hash, ETag / Last-Modified, query text..."""

    def read_page(self, cursor: str | None, limit: int) -> Page:
        """Up to ``limit`` rows after ``cursor`` (None: from the start)."""

    def close(self) -> None: ...


SCHEMES: dict[str, Callable[[str, SourceOptions], Reader]] = {}


def register(*schemes: str):
    def wrap(factory):
        for scheme in schemes:
            SCHEMES[scheme] = factory
        return factory

    return wrap


def scheme_of(uri: str) -> str:
    head, sep, _ = uri.partition("://")
    return head.lower() if sep else "file"


def make_row(record: dict[str, Any], position: str, options: SourceOptions, source: str) -> Row:
    """Apply the row contract to one decoded record; problems name the row.

    This runs once per dataset row, so it avoids the general JSON encoder's per-call setup
    (see ``canonical_json``) and a second UTF-8 encoding of ASCII text."""
    if not isinstance(record, dict):
        raise DatasetError(f"{source}: {position}: a row must be an object of columns")
    id_column, label_column = options.id_column, options.label_column
    item_id, expected = record.get(id_column), record.get(label_column)
    item_id = "" if item_id is None else (item_id if type(item_id) is str else str(item_id)).strip()
    if not item_id:
        raise DatasetError(f"{source}: {position}: missing item id (column {id_column!r})")
    expected = "" if expected is None else (expected if type(expected) is str else str(expected)).strip()
    skipped: tuple[str, ...] = ()
    call, found = False, expected_calls(record, expected, f"{source}: {position}: item {item_id}")
    if found is not None:  # a tool call's arguments, or several calls: canonical JSON; no argument: the label
        expected, skipped = found
        call = expected.startswith("{")
    structured = not expected
    if structured and label_column not in record and label_like(record, label_column) is None:
        obj, _ = expected_object(record)
        structured = obj is not None  # none: a row without a label, for a judged prompt (``unlabelled``)
    if structured:
        expected, skipped = _expected_object(record, position, item_id, label_column, source)
    if len(item_id) > 191:
        raise DatasetError(f"{source}: {position}: item id longer than 191 characters")
    protected = PROTECTED_COLUMN in record
    if protected:
        protected = protected_flag(record[PROTECTED_COLUMN], f"{source}: {position}: item {item_id}")
        skipped += (PROTECTED_COLUMN,)
    if skipped:
        inputs = {k: v for k, v in record.items() if k != id_column and k != label_column and k not in skipped}
    else:
        inputs = {k: v for k, v in record.items() if k != id_column and k != label_column}
    inputs = checked_conversations(inputs, f"{source}: {position}: item {item_id}")
    try:
        input_json = canonical_json(inputs)
    except RecursionError:
        input_json = "[" * (MAX_ROW_DEPTH + 1)  # refused just below, by name
    try:
        size = len(input_json) if input_json.isascii() else len(input_json.encode())
        item_id.encode(), expected.encode()
        if structured or call:
            size += len(expected.encode())
    except UnicodeEncodeError:  # half of a surrogate pair (JSON's "\ud800"): no database can store it
        raise DatasetError(
            f"{source}: {position}: item {item_id.encode(errors='replace').decode()}: "
            "not valid Unicode text (half of a surrogate pair)"
        ) from None
    if size > options.max_row_bytes:
        raise DatasetError(
            f"{source}: {position}: item {item_id}: row is {size} bytes, over the {options.max_row_bytes}-byte limit"
        )
    if input_json.count("[") + input_json.count("{") > MAX_ROW_DEPTH and nesting_depth(inputs) > MAX_ROW_DEPTH:
        raise DatasetError(f"{source}: {position}: item {item_id}: row is nested deeper than {MAX_ROW_DEPTH} levels")
    return Row(item_id, expected, input_json, position, structured, protected, call)


# Column names that say "the label" (any case): a file with one of them but not the label
# column misnamed its label (or the gate config's label_column is wrong), it is not a dataset
# without labels; nor is one whose column is a near miss of the label column's name. Kept
# short: a judged prompt's rows may well carry a reference answer (``ideal``, ``gold``) for
# its judge to read.
LABEL_LIKE = frozenset({"expected", "label", "labels", "expected_label"})


def label_like(columns: Iterable[Any], label_column: str) -> str | None:
    """A column that looks like a misnamed label column (see ``LABEL_LIKE``), or None: a
    file without the label column is a dataset without labels only when it has none."""
    import difflib

    names = [c for c in columns if isinstance(c, str)]
    for name in names:
        if name.strip().lower() in LABEL_LIKE or name in (DEFAULT_LABEL_COLUMN, label_column):
            return name
    close = difflib.get_close_matches(label_column, names, n=1, cutoff=0.8)
    return close[0] if close else None


def read_by_contract(column: str) -> bool:
    """Whether ``make_row`` reads the column itself beside a label: an expected call's
    arguments (``expected``, ``expected.<argument>``) or a conversation (``messages``), so a
    reader's shortcut around ``make_row`` must not take a row that has it."""
    return column == EXPECTED_COLUMN or column.startswith(EXPECTED_PREFIX) or is_conversation_field(column)


def _expected_object(
    record: dict[str, Any], position: str, item_id: str, label_column: str, source: str
) -> tuple[str, tuple[str, ...]]:
    """A row with an empty label: its expected object (``gate.prompt.structured.expected``) as
    canonical JSON, and the columns it came from (not the item's input); or the error. (A
    row without the label column at all and no expected object is a row without a label,
    ``""``: a judged prompt's dataset needs none; a prompt decided by label is refused at
    submit, ``gate.kinds.base.DecisionKind.check_rows``.)"""
    obj, columns = expected_object(record)
    if obj is None:
        like = label_like(record, label_column) if label_column not in record else None
        raise DatasetError(
            f"{source}: {position}: item {item_id}: missing label (column {label_column!r}), and no "
            "expected object (an expected column holding an object, or expected.<field> columns)"
            + (f"; its column {like!r} reads as a misnamed label column" if like else "")
        )
    return checked_expected(obj, f"{source}: {position}: item {item_id}"), columns


def nesting_depth(value: Any, stop_at: int = MAX_ROW_DEPTH + 1) -> int:
    """How deep lists and mappings nest in ``value`` (1 for a flat mapping), counted
    without recursion and up to ``stop_at``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            if deepest >= stop_at:
                return deepest
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def _canonical_encoder() -> Callable[[Any], str]:
    """Compact JSON with sorted keys, non-ASCII kept, unknown types as ``str``.

    ``json.JSONEncoder.encode`` builds a new C encoder on every call, which costs more
    than encoding a small row; this builds it once. Where the C encoder is missing the
    pure-Python encoder does the same work."""
    from json import encoder as json_encoder

    general = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode
    # json.encoder's C accelerators (None without _json); typeshed does not declare them
    make, quote = json_encoder.c_make_encoder, json_encoder.c_encode_basestring  # type: ignore[attr-defined]
    if make is None or quote is None:
        return general
    one_shot = make(None, str, quote, None, ":", ",", True, False, True)

    def encode(value: Any) -> str:
        if type(value) is str:
            return quote(value)
        return "".join(one_shot(value, 0))

    return encode


canonical_json = _canonical_encoder()
json_quote = json.encoder.c_encode_basestring or json.encoder.py_encode_basestring  # type: ignore[attr-defined]  # as above


def row_digests(rows: list[Row]) -> list[bytes]:
    """Each row's SHA-256 over its JSON-quoted id and label and its input JSON, joined by
    0x1F (and, for a protected row, a mark): what a version stores as the row's hash and
    hashes, in order, into its content hash."""
    sha, quote = hashlib.sha256, json_quote  # once per row: no call per row
    return [
        sha(
            f"{quote(r.item_id)}\x1f{quote(r.expected)}\x1f{r.input_json}{_PROTECTED if r.protected else ''}".encode()
        ).digest()
        for r in rows
    ]


_PROTECTED = "\x1fprotected"  # only a protected row's digest has it: the others hash as they always did


class ContentHash:
    """A version's content hash: SHA-256 over its rows' digests in order. The same rows in
    the same order hash alike however they were paged. (An order-independent sum of row
    digests was forgeable: whoever edits rows can make a different set collide with a
    stored version's sum by a generalized-birthday search, and the import would silently
    keep the old data.)"""

    PREFIX = b"promptgate rows v1\n"

    def __init__(self):
        self._sha = hashlib.sha256(self.PREFIX)

    def update(self, digests: list[bytes]) -> None:
        for digest in digests:
            self._sha.update(digest)

    def hexdigest(self) -> str:
        return self._sha.hexdigest()


def content_hash(rows: list[Row]) -> str:
    """The content hash of these rows, in this order."""
    hasher = ContentHash()
    hasher.update(row_digests(rows))
    return hasher.hexdigest()


def first_page_size(page_size: int, page_bytes: int, max_row_bytes: int) -> int:
    """Rows for the first page, before any row was read: as many as ``page_bytes`` holds
    of rows as wide as a row may be. (A first page of ``page_size`` rows of 64 KiB each
    held 320 MB; a CSV header can make every row that wide, issue 33.)"""
    return max(1, min(page_size, page_bytes // max(1, max_row_bytes)))


def next_page_size(rows: list[Row], page_size: int, page_bytes: int) -> int:
    """Rows for the next page: ``page_size``, or fewer when rows like these would make it
    hold more than ``page_bytes`` of row data. Big pages cost fewer statements and commits
    per row (bench/README.md); the byte bound keeps a page of wide rows (up to 64 KiB each)
    from holding gigabytes, with three pages in memory at once (one read, two written)."""
    if not rows:
        return page_size
    row_bytes = sum(len(r.input_json) + len(r.item_id) + len(r.expected) for r in rows) // len(rows)
    return max(1, min(page_size, page_bytes // max(1, row_bytes)))


def absolute_source(uri: str, base_dir: str | Path | None) -> str:
    """A source URI as registered: a local file path made absolute (against ``base_dir``,
    the gate config's folder, or the current one); other URIs as they are."""
    if scheme_of(uri) != "file":
        return uri
    path = Path(uri[len("file://") :] if uri.startswith("file://") else uri)
    if not path.is_absolute():
        path = Path(base_dir or Path.cwd()) / path
    return str(path.resolve())


def shown_source(uri: str) -> str:
    """A source URI as the service shows it to any caller: no credential and no path of the
    machine that read it. A file is its name; http(s) and s3 are scheme://host/path (no
    user-info, no query string: a token or a signature lives there); a sql+ source keeps
    its user, host, database and query, with the password as *** and no driver option (an
    SQLite database: its file name)."""
    text = (uri or "").strip()
    scheme = scheme_of(text)
    if scheme == "file":
        return PurePosixPath(text[len("file://") :] if text.startswith("file://") else text).name
    head, _, rest = text.partition("://")
    rest = rest.split("#", 1)[0]
    location, _, query = rest.partition("?")
    netloc, slash, path = location.partition("/")
    userinfo, at, hostport = netloc.rpartition("@")
    if not scheme.startswith("sql+"):
        return f"{head}://{hostport}{slash}{path}"
    user, colon, _ = userinfo.partition(":")
    who = f"{user}{':***' if colon else ''}@" if at else ""
    if scheme.startswith("sql+sqlite"):
        path = PurePosixPath(path).name
    kept = [p for p in query.split("&") if p.partition("=")[0] == "query"]
    return f"{head}://{who}{hostport}{slash}{path}" + (f"?{'&'.join(kept)}" if kept else "")


def resolve_path(uri: str, base_dir: str | None) -> Path:
    path = Path(uri[len("file://") :] if uri.startswith("file://") else uri)
    if not path.is_absolute() and base_dir:
        path = Path(base_dir) / path
    return path
