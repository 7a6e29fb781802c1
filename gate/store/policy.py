"""A run's items by slice and by name, against the live version's answers on the same items
(``gate.verdict.item_policy``): accuracy per value of a slice column, the protected items that
broke, and what became of the items a mapping accepts breaking. Reconcile reads these once
per run: one GROUP BY for the slices, one read for the flagged protected items that broke,
and reads by item id (the version's ``(version_id, item_id)`` key, then the items'
primary key; ``ID_CHUNK`` ids at a time) for the ids a gate config lists."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import case, func, literal, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from gate.records import FlipSample
from gate.states import Verdict

from .dialect import json_text
from .schema import dataset_row, prompt_run_item

SCORED = (Verdict.MATCH, Verdict.MISMATCH)
SLICE_CHARS = 100  # a slice's value as grouped and shown
ID_CHUNK = 500


def _count(condition):
    return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)


def slice_counts(
    conn: Connection, run_id: int, version_id: int, column: str, baseline_run_id: int | None, limit: int
) -> list[dict]:
    """Per value of the item field ``column`` (None: the row has no such value), the
    largest ``limit`` slices first: items scored, the candidate's matches and, with a
    baseline run, live's matches and the fixed and broken items among them."""
    cand, r = prompt_run_item.alias("cand"), dataset_row
    value = func.substr(json_text(r.c.input, column), 1, SLICE_CHARS).label("value")
    joined = cand.join(r, (r.c.version_id == version_id) & (r.c.position == cand.c.position))
    right_now = cand.c.verdict == Verdict.MATCH
    columns = [value, func.count(), _count(right_now)]
    if baseline_run_id is not None:
        live = prompt_run_item.alias("live")
        joined = joined.join(live, (live.c.run_id == baseline_run_id) & (live.c.position == cand.c.position))
        right_before = live.c.verdict == Verdict.MATCH
        columns += [_count(right_before), _count(right_now & ~right_before), _count(~right_now & right_before)]
    query = (
        select(*columns)
        .select_from(joined)
        .where(cand.c.run_id == run_id, cand.c.verdict.in_(SCORED))
        .group_by(value)
        .order_by(func.count().desc(), value)
        .limit(limit)
    )
    if baseline_run_id is not None:
        query = query.where(live.c.verdict.in_(SCORED))
    out = []
    for row in conn.execute(query):
        found = {"value": row[0], "items": int(row[1]), "matches": int(row[2])}
        if baseline_run_id is not None:
            found.update(live_matches=int(row[3]), fixed=int(row[4]), broken=int(row[5]))
        out.append(found)
    return out


def _broken_query(run_id: int, baseline_run_id: int, version_id: int):
    cand, live, r = prompt_run_item.alias("cand"), prompt_run_item.alias("live"), dataset_row
    joined = cand.join(live, (live.c.run_id == baseline_run_id) & (live.c.position == cand.c.position)).join(
        r, (r.c.version_id == version_id) & (r.c.position == cand.c.position)
    )
    columns = (
        cand.c.item_id,
        cand.c.expected_decision,
        live.c.actual_decision,
        cand.c.actual_decision,
        cand.c.raw_output,
    )
    where = (cand.c.run_id == run_id, cand.c.verdict == Verdict.MISMATCH, live.c.verdict == Verdict.MATCH)
    return cand, r, joined, columns, where


def flagged_broken(
    conn: Connection, run_id: int, baseline_run_id: int, version_id: int, excluded: Sequence[str], limit: int
) -> tuple[int, list[tuple[int, FlipSample]]]:
    """The items whose dataset row is protected that live answered right and the run
    wrong, but for ``excluded`` ids (accepted breaks): how many, and the first ``limit``
    (with their positions)."""
    cand, r, joined, columns, where = _broken_query(run_id, baseline_run_id, version_id)
    where = (*where, r.c.protected == 1)
    if excluded:
        where = (*where, cand.c.item_id.not_in(list(excluded)))
    count = conn.execute(select(func.count()).select_from(joined).where(*where)).scalar() or 0
    # (position, item id, expected, live's answer, the run's answer, its output): the columns' types
    rows: Iterable[tuple[int, str, str, str | None, str | None, str | None]] = (
        conn.execute(
            select(cand.c.position, *columns).select_from(joined).where(*where).order_by(cand.c.position).limit(limit)
        )
        if count
        else []
    )
    return int(count), [(row[0], FlipSample(*row[1:])) for row in rows]


def items_by_id_query(run_id: int, baseline_run_id: int | None, version_id: int, item_ids: Sequence[str]):
    """The statement of ``items_by_id`` for one chunk of ids (its plan is tested)."""
    cand, r = prompt_run_item.alias("cand"), dataset_row
    joined = r.join(cand, (cand.c.run_id == run_id) & (cand.c.position == r.c.position))
    columns: list[ColumnElement[Any]] = [
        r.c.item_id,
        cand.c.position,
        r.c.protected,
        cand.c.verdict,
        cand.c.expected_decision,
        cand.c.actual_decision,
        cand.c.raw_output,
    ]
    if baseline_run_id is not None:
        live = prompt_run_item.alias("live")
        joined = joined.outerjoin(live, (live.c.run_id == baseline_run_id) & (live.c.position == cand.c.position))
        columns += [live.c.verdict, live.c.actual_decision]
    else:
        columns += [literal(None), literal(None)]
    return select(*columns).select_from(joined).where(r.c.version_id == version_id, r.c.item_id.in_(list(item_ids)))


def items_by_id(
    conn: Connection, run_id: int, baseline_run_id: int | None, version_id: int, item_ids: Sequence[str]
) -> list[dict]:
    """The run's items among ``item_ids`` (those it has), each with its position, whether
    its row is protected, its verdict and live's (None without a baseline run), and what
    both answered. Read through the version's (version_id, item_id) key, then each item
    by its primary key (run_id, position): a chunk of ids at a time, never a scan of the
    run (its items have no item-id index: bench/README.md, materialize)."""
    found = []
    ids = sorted(set(item_ids))
    for start in range(0, len(ids), ID_CHUNK):
        for row in conn.execute(items_by_id_query(run_id, baseline_run_id, version_id, ids[start : start + ID_CHUNK])):
            found.append(
                {
                    "item_id": row[0],
                    "position": int(row[1]),
                    "protected": bool(row[2]),
                    "verdict": row[3],
                    "expected": row[4],
                    "actual": row[5],
                    "output": row[6],
                    "live_verdict": row[7],
                    "live_actual": row[8],
                }
            )
    return found
