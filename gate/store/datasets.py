"""Datasets (``dataset``: a name and where its rows come from) and the bars that map a
prompt to a dataset (``prompt_dataset``: the minimum accuracy it must clear)."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gate.errors import NotFound
from gate.records import Dataset, DatasetMapping

from .dialect import db_now
from .schema import dataset, prompt_dataset


def _dataset(row) -> Dataset:
    return Dataset(row.id, row.name, row.source_uri, row.options or {}, row.created_at, row.current_version_id)


def ensure_dataset(conn: Connection, name: str, source_uri: str, options: dict) -> tuple[Dataset, bool]:
    """The dataset called ``name``, registered now (no version yet) when it is new. Returns
    (dataset, created). Its source changes only with a version (``set_current_version``)."""
    existing = find_dataset(conn, name)
    if existing is not None:
        return existing, False
    try:
        with conn.begin_nested():
            conn.execute(insert(dataset).values(name=name, source_uri=source_uri, options=options, created_at=db_now()))
        return get_dataset(conn, name), True
    except IntegrityError:  # registered by someone else a moment ago
        return get_dataset(conn, name), False


def delete_dataset(conn: Connection, dataset_id: int) -> bool:
    """A dataset registered a moment ago whose first import failed (it has no version and no
    bar refers to it yet)."""
    return (
        conn.execute(delete(dataset).where(dataset.c.id == dataset_id, dataset.c.current_version_id.is_(None))).rowcount
        == 1
    )


def find_dataset(conn: Connection, name: str) -> Dataset | None:
    row = conn.execute(select(dataset).where(dataset.c.name == name)).first()
    return _dataset(row) if row else None


def get_dataset(conn: Connection, name: str) -> Dataset:
    found = find_dataset(conn, name)
    if found is None:
        raise NotFound(f"unknown dataset {name!r}: register it with `promptgate dataset add {name} --source URI`")
    return found


def list_datasets(conn: Connection) -> list[Dataset]:
    return [_dataset(r) for r in conn.execute(select(dataset).order_by(dataset.c.name))]


def list_mappings(conn: Connection, prompt_name: str | None = None) -> list[DatasetMapping]:
    stmt = (
        select(
            prompt_dataset.c.prompt_name,
            prompt_dataset.c.dataset_id,
            dataset.c.name,
            prompt_dataset.c.min_accuracy,
            prompt_dataset.c.bars,
            prompt_dataset.c.declared_in,
        )
        .join(dataset, dataset.c.id == prompt_dataset.c.dataset_id)
        .order_by(prompt_dataset.c.prompt_name, dataset.c.name)
    )
    if prompt_name is not None:
        stmt = stmt.where(prompt_dataset.c.prompt_name == prompt_name)
    return [DatasetMapping(row[0], row[1], row[2], row[3], row[4], row[5]) for row in conn.execute(stmt)]


def upsert_mapping(
    conn: Connection,
    prompt_name: str,
    dataset_id: int,
    min_accuracy: Decimal,
    bars: dict | None = None,
    declared_in: str | None = None,
) -> bool:
    """Map a prompt to a dataset with its bars, or change them; ``declared_in``: the gate
    config declaring it (None: the CLI's). Returns True when created."""
    changed = conn.execute(
        update(prompt_dataset)
        .where(prompt_dataset.c.prompt_name == prompt_name, prompt_dataset.c.dataset_id == dataset_id)
        .values(min_accuracy=min_accuracy, bars=bars, declared_in=declared_in)
    ).rowcount
    if changed:
        return False
    conn.execute(
        insert(prompt_dataset).values(
            prompt_name=prompt_name,
            dataset_id=dataset_id,
            min_accuracy=min_accuracy,
            bars=bars,
            created_at=db_now(),
            declared_in=declared_in,
        )
    )
    return True


def delete_mapping(conn: Connection, prompt_name: str, dataset_id: int) -> bool:
    return (
        conn.execute(
            delete(prompt_dataset).where(
                prompt_dataset.c.prompt_name == prompt_name, prompt_dataset.c.dataset_id == dataset_id
            )
        ).rowcount
        > 0
    )
