"""The per-field figures of a run decided field by field (``gate.prompt.structured``), counted in
the database from the items' masks (``fields_wrong``, ``fields_missing``: bit *i* is the
*i*-th field in name order) once per run, by finalize and reconcile: one aggregate over
the run's items (and, against the live version, over the pairs), whatever its size."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

from sqlalchemy import case, func, literal, select
from sqlalchemy.engine import Connection

from gate.states import Verdict

from .dialect import json_text
from .schema import prompt_run_item

SCORED = (Verdict.MATCH, Verdict.MISMATCH)
LABEL_CHARS = 128  # a label's length at most: the grouping keeps an in-memory temporary table


def _count(condition):
    return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)


def _has(mask, bit: int):
    return mask.op("&")(literal(bit)) != 0


def structured_breakdown(
    conn: Connection, run_id: int, not_an_object: str, invalid: str
) -> list[tuple[str, None, str | None, int]]:
    """(verdict, None, ``invalid`` for answers that were ``not_an_object``, count): what
    finalize derives a fields run's counts from (its items' expected objects differ item by
    item: no confusion matrix of whole objects)."""
    i = prompt_run_item
    marker = case((i.c.actual_decision == not_an_object, literal(invalid)), else_=None)
    rows = conn.execute(
        select(i.c.verdict, marker, func.count()).where(i.c.run_id == run_id).group_by(i.c.verdict, marker)
    )
    return [(v, None, m, n) for v, m, n in cast("Iterable[tuple[str, str | None, int]]", rows)]  # the columns' types


def field_counts(conn: Connection, run_id: int, fields: int) -> dict[str, Any]:
    """Items scored, and per field (by bit) how many of them had it wrong and missing."""
    i = prompt_run_item
    scored = i.c.verdict.in_(SCORED)
    columns = [func.count()]
    for bit in range(fields):
        columns += [_count(_has(i.c.fields_wrong, 1 << bit)), _count(_has(i.c.fields_missing, 1 << bit))]
    row = conn.execute(select(*columns).where(i.c.run_id == run_id, scored)).first()
    assert row is not None  # counts without GROUP BY: always one row
    values = [int(v) for v in row]
    return {"scored": values[0], "wrong": values[1::2], "missing": values[2::2]}


def label_confusion(
    conn: Connection, run_id: int, name: str, bit: int, labels: Sequence[str], missing: str, other: str
) -> list[tuple[str | None, str, int]]:
    """(expected value, answered label — or ``missing``, or ``other`` for a value that is
    none of ``labels`` —, items) of one label field over the run's scored items."""
    i = prompt_run_item
    answered = json_text(i.c.actual_decision, name)
    actual = case(
        (~i.c.actual_decision.like("{%"), literal(missing)),
        (_has(i.c.fields_missing, bit), literal(missing)),
        (answered.in_(list(labels)), func.substr(answered, 1, LABEL_CHARS)),
        else_=literal(other),
    )
    expected = func.substr(json_text(i.c.expected_decision, name), 1, LABEL_CHARS)
    rows = conn.execute(
        select(expected, actual, func.count())
        .where(i.c.run_id == run_id, i.c.verdict.in_(SCORED), i.c.expected_decision.like("{%"))
        .group_by(expected, actual)
    )
    return [(e, a, int(n)) for e, a, n in cast("Iterable[tuple[str | None, str, int]]", rows)]  # the columns' types


def field_flips(
    conn: Connection, run_id: int, baseline_run_id: int, pairs: Sequence[tuple[int, int]]
) -> list[dict[str, int]]:
    """Per (candidate bit, live bit) of a field both decide: over the items both scored,
    how many live had right, and fixed (live wrong, candidate right) and broken (the
    reverse)."""
    cand, live = paired_items()
    columns = [func.count()]
    for cand_bit, live_bit in pairs:
        right_now, right_before = ~_has(cand.c.fields_wrong, cand_bit), ~_has(live.c.fields_wrong, live_bit)
        columns += [_count(right_before), _count(right_now & ~right_before), _count(~right_now & right_before)]
    values = paired_counts(conn, run_id, baseline_run_id, (cand, live), columns)
    return [
        {"paired": values[0], "live_right": values[1 + 3 * k], "fixed": values[2 + 3 * k], "broken": values[3 + 3 * k]}
        for k in range(len(pairs))
    ]


def paired_items():
    """The candidate's items and live's, aliased for ``paired_counts``."""
    return prompt_run_item.alias("cand"), prompt_run_item.alias("live")


def paired_counts(conn: Connection, run_id: int, baseline_run_id: int, aliases, columns: list) -> list[int]:
    """``columns`` (counts over ``aliases``, the pair ``paired_items`` gave) over the items at
    the same position that the candidate's run and live's both scored, both with their
    fields compared."""
    cand, live = aliases
    row = conn.execute(
        select(*columns)
        .select_from(cand.join(live, (live.c.run_id == baseline_run_id) & (live.c.position == cand.c.position)))
        .where(
            cand.c.run_id == run_id,
            cand.c.verdict.in_(SCORED),
            live.c.verdict.in_(SCORED),
            cand.c.fields_wrong.is_not(None),
            live.c.fields_wrong.is_not(None),
        )
    ).one()  # counts: always one row
    return [int(v) for v in row]
