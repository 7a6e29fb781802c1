"""What a report reads of a run's failing items beyond their verdicts: the conversation a
prompt's ``history`` entry inserted (``gate.prompt.conversation``), from the items' dataset
rows by item id (the version's unique key), a handful per report."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, cast

from sqlalchemy import select
from sqlalchemy.engine import Connection

from .schema import dataset_row


def row_fields(conn: Connection, version_id: int, item_ids: Sequence[str], field: str) -> dict[str, Any]:
    """item id → the value of ``field`` in its row's input (absent: not in the map)."""
    if not item_ids:
        return {}
    r = dataset_row
    rows = conn.execute(
        select(r.c.item_id, r.c.input).where(r.c.version_id == version_id, r.c.item_id.in_(list(item_ids)))
    )
    out: dict[str, Any] = {}
    for item_id, text in cast("Iterable[tuple[str, dict[str, Any] | str]]", rows):  # the columns' types
        value = text if isinstance(text, dict) else json.loads(text)
        if isinstance(value, dict) and field in value:
            out[item_id] = value[field]
    return out


def row_inputs(conn: Connection, version_id: int, item_ids: Sequence[str]) -> dict[str, Any]:
    """item id → its row's input (a report's sample items: a handful, by the version's unique key)."""
    if not item_ids:
        return {}
    r = dataset_row
    rows = conn.execute(
        select(r.c.item_id, r.c.input).where(r.c.version_id == version_id, r.c.item_id.in_(list(item_ids)))
    )
    return {
        item_id: (text if isinstance(text, (dict, list)) else json.loads(text))
        for item_id, text in cast("Iterable[tuple[str, Any]]", rows)  # the columns' types
    }
