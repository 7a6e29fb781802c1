"""Dataset versions: the rows of a dataset imported into the gate, immutable, keyed by their
content hash (``dataset_version``, ``dataset_row``). A version is IMPORTING while its pages
go in, READY once its hash is known, and DELETING once ``prune`` has taken it (its rows
then go in batches); a READY version with the same content as another of its dataset
cannot exist (UNIQUE (dataset_id, content_hash)): the importer discards it. A run copies
its items from a READY version's rows (``items.copy_version_page``).

Which version is current, which one a submission pins and which one prune takes are
decided under the dataset's row lock (``lock_dataset``): setting the current version and
pinning it need the version READY, prune needs it not current and not pinned, so a version
can never be current or pinned and deleted at once."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, cast

from sqlalchemy import BigInteger, Integer, String, Text, bindparam, delete, func, insert, select, update
from sqlalchemy.engine import Connection

from gate.errors import NotFound
from gate.records import DatasetVersion, VersionRow

from .dialect import db_now
from .schema import dataset, dataset_row, dataset_version
from .textsql import execute_text, rows_template, string_literal, template

IMPORTING, READY, DELETING = "IMPORTING", "READY", "DELETING"


def _version(row) -> DatasetVersion:
    return DatasetVersion(
        row.id,
        row.dataset_id,
        row.status,
        row.content_hash,
        row.row_count,
        row.labels or {},
        row.source_uri,
        row.source_options or {},
        row.source_version,
        row.created_at,
        row.fields,
        row.number,
    )


def create_version(
    conn: Connection, dataset_id: int, source_uri: str, options: dict, source_version: str | None
) -> int:
    """A new IMPORTING version of the dataset; its rows go in with ``insert_version_rows``."""
    result = conn.execute(
        insert(dataset_version).values(
            dataset_id=dataset_id,
            status=IMPORTING,
            row_count=0,
            source_uri=source_uri,
            source_options=options,
            source_version=(source_version or "")[:255] or None,
            created_at=db_now(),
        )
    )
    key = result.inserted_primary_key
    assert key is not None  # an INSERT of one row
    return key[0]


def insert_version_rows(conn: Connection, version_id: int, rows: Sequence[tuple[int, str, str, str, str, int]]) -> int:
    """One page of (position, item_id, expected, input JSON, row hash, protected 0/1). The
    import's hot path: on PyMySQL over utf8 the page goes as multi-row INSERTs of quoted
    literals (the text form of ``_rows_insert``: ``textsql``), elsewhere as the driver's
    executemany of it."""
    if not rows:
        return 0
    positions, ids, labels, inputs, hashes, protected = zip(*rows)
    literal = string_literal(conn)
    if literal is None:
        conn.execute(
            _ROWS_INSERT,
            [
                {
                    "version_id": version_id,
                    "position": p,
                    "item_id": i,
                    "expected_decision": e,
                    "input": j,
                    "row_hash": h,
                    "protected": k,
                }
                for p, i, e, j, h, k in rows
            ],
        )
        return len(rows)
    columns = {
        "version_id": int(version_id),
        "position": positions,
        "item_id": ids,
        "expected_decision": labels,
        "input": inputs,
        "row_hash": hashes,
        "protected": protected,
    }
    for statement in rows_template("dataset_rows", lambda: _ROWS_INSERT, conn, literal).statements(columns):
        execute_text(conn, statement)
    return len(rows)


def _rows_insert():
    """A dataset row, as a page inserts it (its input is JSON text already): the one
    definition of the SQLAlchemy form and the text form's rows (``textsql``)."""
    return insert(dataset_row).values(
        version_id=bindparam("version_id", type_=BigInteger),
        position=bindparam("position", type_=Integer),
        item_id=bindparam("item_id", type_=String),
        expected_decision=bindparam("expected_decision", type_=String),
        input=bindparam("input", type_=Text),
        row_hash=bindparam("row_hash", type_=String),
        protected=bindparam("protected", type_=Integer),
    )


_ROWS_INSERT = _rows_insert()


def existing_version_ids(conn: Connection, version_id: int, item_ids: Sequence[str]) -> list[str]:
    """Which of ``item_ids`` the version holds already (for a duplicate id's message)."""
    if not item_ids:
        return []
    r = dataset_row
    return list(
        conn.execute(select(r.c.item_id).where(r.c.version_id == version_id, r.c.item_id.in_(list(item_ids)))).scalars()
    )


def finish_version(
    conn: Connection,
    version_id: int,
    dataset_id: int,
    content_hash: str,
    row_count: int,
    labels: dict[str, int],
    fields: dict | None = None,
) -> bool:
    """IMPORTING → READY with its hash, counts (rows per label, rows per field) and its
    number in the dataset (the dataset's counter moved on by one: call under
    ``lock_dataset``); False when it is not IMPORTING (any more). Raises IntegrityError
    when a READY version of the dataset has that content."""
    counted = conn.execute(
        update(dataset).where(dataset.c.id == dataset_id).values(version_numbers=dataset.c.version_numbers + 1)
    ).rowcount
    if counted != 1:
        return False
    number = conn.execute(select(dataset.c.version_numbers).where(dataset.c.id == dataset_id)).scalar()
    v = dataset_version
    return (
        conn.execute(
            update(v)
            .where(v.c.id == version_id, v.c.status == IMPORTING)
            .values(
                status=READY,
                content_hash=content_hash,
                row_count=row_count,
                labels=labels,
                fields=fields,
                number=number,
            )
        ).rowcount
        == 1
    )


def set_version_fields(conn: Connection, version_id: int, fields: dict) -> bool:
    """Store the field counts of a version that has none yet (imported before they were
    counted); False when it has them already (another submission counted them first) or
    is gone."""
    v = dataset_version
    return conn.execute(update(v).where(v.c.id == version_id, v.c.fields.is_(None)).values(fields=fields)).rowcount == 1


def find_version_by_number(conn: Connection, dataset_id: int, number: int) -> DatasetVersion | None:
    v = dataset_version
    row = conn.execute(select(v).where(v.c.dataset_id == dataset_id, v.c.number == number, v.c.status == READY)).first()
    return _version(row) if row else None


def find_version_by_content(conn: Connection, dataset_id: int, content_hash: str) -> DatasetVersion | None:
    v = dataset_version
    row = conn.execute(
        select(v).where(v.c.dataset_id == dataset_id, v.c.content_hash == content_hash, v.c.status == READY)
    ).first()
    return _version(row) if row else None


def get_version(conn: Connection, version_id: int) -> DatasetVersion:
    row = conn.execute(select(dataset_version).where(dataset_version.c.id == version_id)).first()
    if row is None:
        raise NotFound(f"unknown dataset version {version_id}")
    return _version(row)


def list_versions(conn: Connection, dataset_id: int) -> list[DatasetVersion]:
    v = dataset_version
    return [
        _version(r)
        for r in conn.execute(
            select(v).where(v.c.dataset_id == dataset_id, v.c.status == READY).order_by(v.c.id.desc())
        )
    ]


def lock_dataset(conn: Connection, dataset_id: int, share: bool = False) -> int | None:
    """Lock the dataset's row for the rest of the transaction (shared: a submission pinning
    its current version; exclusive: changing it, or prune taking one of its versions) and
    return its current version id, read under the lock. SQLite serializes transactions."""
    return conn.execute(
        select(dataset.c.current_version_id).where(dataset.c.id == dataset_id).with_for_update(read=share)
    ).scalar()


def version_status(conn: Connection, version_id: int) -> str | None:
    """The version's status by a locking read (the latest committed, not a snapshot)."""
    v = dataset_version
    return conn.execute(select(v.c.status).where(v.c.id == version_id).with_for_update(read=True)).scalar()


def set_current_version(
    conn: Connection, dataset_id: int, version_id: int, source_uri: str, options: dict, seen: int | None
) -> bool:
    """Make a READY version the dataset's current one (what new submissions pin), with the
    source it came from, if the current version is still ``seen`` (the one before the
    import: a concurrent import that finished first is not overwritten by an older one).
    False when either condition fails; nothing is written then."""
    current = lock_dataset(conn, dataset_id)
    if current != seen or version_status(conn, version_id) != READY:
        return False
    return (
        conn.execute(
            update(dataset)
            .where(dataset.c.id == dataset_id)
            .values(current_version_id=version_id, source_uri=source_uri, options=options)
        ).rowcount
        == 1
    )


def version_rows(conn: Connection, version_id: int, after: int = -1, limit: int = 1000) -> list[VersionRow]:
    """Rows after position ``after``, in order (a page of a preview or a diff)."""
    r = dataset_row
    rows = conn.execute(
        select(r.c.position, r.c.item_id, r.c.expected_decision, r.c.input, r.c.row_hash)
        .where(r.c.version_id == version_id, r.c.position > after)
        .order_by(r.c.position)
        .limit(limit)
    )
    return _version_rows(rows)


def _version_rows(rows: Iterable[Any]) -> list[VersionRow]:
    """VersionRows of (position, item_id, expected_decision, input, row_hash) rows."""
    typed = cast("Iterable[tuple[int, str, str, dict[str, Any], str]]", rows)  # the columns' types
    return [
        VersionRow(position, item_id, expected, data, row_hash) for position, item_id, expected, data, row_hash in typed
    ]


def version_keys(conn: Connection, version_id: int, after_item: str | None, limit: int) -> list[tuple[str, str, str]]:
    """(item_id, label, row hash) of rows after ``after_item`` in item-id order, on the
    (version_id, item_id) unique index: a version streamed for a diff in constant memory."""
    r = dataset_row
    stmt = select(r.c.item_id, r.c.expected_decision, r.c.row_hash).where(r.c.version_id == version_id)
    if after_item is not None:
        stmt = stmt.where(r.c.item_id > after_item)
    rows = conn.execute(stmt.order_by(r.c.item_id).limit(limit))
    return cast("list[tuple[str, str, str]]", [tuple(row) for row in rows])  # the columns' types


def version_inputs(conn: Connection, version_id: int, positions: Sequence[int]) -> dict[int, Any]:
    """The inputs of the rows at ``positions`` (items point at their row, not a copy): what
    the executor's render thread reads for a chunk claimed without them."""
    if not positions:
        return {}
    params = {"version_id": version_id, "positions": list(positions)}
    quote = string_literal(conn)
    if quote is not None:  # the text form: rows come back as (position, input JSON text)
        rows = execute_text(conn, template("version_inputs", lambda: _VERSION_INPUTS, conn, quote)(params))
        return {position: json.loads(text) for position, text in rows}
    return dict(conn.execute(_VERSION_INPUTS, params).all())


def _version_inputs_statement():
    """``version_inputs``' read: the one definition of its SQLAlchemy and text forms."""
    r = dataset_row
    return select(r.c.position, r.c.input).where(
        r.c.version_id == bindparam("version_id", type_=BigInteger),
        r.c.position.in_(bindparam("positions", expanding=True)),
    )


_VERSION_INPUTS = _version_inputs_statement()


def version_labels(conn: Connection, version_id: int) -> dict[str, int]:
    """Rows per expected label (one GROUP BY over the version)."""
    r = dataset_row
    rows = conn.execute(
        select(r.c.expected_decision, func.count()).where(r.c.version_id == version_id).group_by(r.c.expected_decision)
    )
    return {label: n for label, n in cast("Iterable[tuple[str, int]]", rows)}  # the columns' types


def rows_with_labels(conn: Connection, version_id: int, labels: Sequence[str], limit: int) -> list[VersionRow]:
    """The first rows whose label is one of ``labels`` (examples for a message)."""
    r = dataset_row
    rows = conn.execute(
        select(r.c.position, r.c.item_id, r.c.expected_decision, r.c.input, r.c.row_hash)
        .where(r.c.version_id == version_id, r.c.expected_decision.in_(list(labels)))
        .order_by(r.c.position)
        .limit(limit)
    )
    return _version_rows(rows)


def delete_version_rows(conn: Connection, version_id: int, limit: int) -> int:
    """Delete up to ``limit`` rows of a version, lowest positions first: the last position
    of the batch is read, then everything up to it deleted, both on the primary key (no
    DELETE ... LIMIT, which SQLite may lack)."""
    r = dataset_row
    last = conn.execute(
        select(r.c.position).where(r.c.version_id == version_id).order_by(r.c.position).offset(limit - 1).limit(1)
    ).scalar()
    where = [r.c.version_id == version_id] + ([r.c.position <= last] if last is not None else [])
    return conn.execute(delete(r).where(*where)).rowcount


def delete_version(conn: Connection, version_id: int) -> bool:
    """The version row, once its rows are gone."""
    return conn.execute(delete(dataset_version).where(dataset_version.c.id == version_id)).rowcount == 1
