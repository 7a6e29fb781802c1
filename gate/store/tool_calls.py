"""The figures of a run whose answers are tool calls or are held to a strict schema
(``gate.prompt.tool_decision``, ``gate.prompt.answer_schema``), counted in the database once
per run by finalize and reconcile, one aggregate each, whatever the run's size:

* ``argument_counts``: per field of a tool_call decision, the items that compared it (an
  argument is compared on the items whose expected call has it: its ``missing`` bit alone
  means *not compared*), and of those, wrong and missing;
* ``function_confusion``: expected function × called function (a declared one, ``none``,
  ``(several)`` calls, or ``(other)``), over the scored items;
* ``argument_flips``: per field both decide, over the items both compared it on: live's
  right answers, fixed and broken;
* ``marked_counts``: the answers marked by their reading: arguments not JSON, off their
  function's schema, answers off the prompt's strict schema, and the items expecting and
  making several calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

from sqlalchemy import and_, case, func, literal, not_, or_, select
from sqlalchemy.engine import Connection

from gate.states import Verdict

from .dialect import json_text
from .fields import paired_counts, paired_items
from .schema import prompt_run_item

SCORED = (Verdict.MATCH, Verdict.MISMATCH)
LABEL_CHARS = 128
FUNCTION = "function"


def _count(condition):
    return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)


def _has(mask, bit: int):
    return mask.op("&")(literal(bit)) != 0


def _compared(item, bit: int):
    """Whether an item compared the field of ``bit`` (not: its missing bit without its wrong bit)."""
    return not_(and_(_has(item.c.fields_missing, bit), ~_has(item.c.fields_wrong, bit)))


def argument_counts(conn: Connection, run_id: int, fields: int) -> dict[str, Any]:
    """Items scored and, per field (by bit): compared, wrong, missing."""
    i = prompt_run_item
    columns = [func.count()]
    for bit in range(fields):
        flag = 1 << bit
        columns += [
            _count(_compared(i, flag)),
            _count(_has(i.c.fields_wrong, flag)),
            _count(_has(i.c.fields_wrong, flag) & _has(i.c.fields_missing, flag)),
        ]
    row = conn.execute(select(*columns).where(i.c.run_id == run_id, i.c.verdict.in_(SCORED))).first()
    assert row is not None  # counts without GROUP BY: always one row
    values = [int(v) for v in row]
    return {"scored": values[0], "compared": values[1::3], "wrong": values[2::3], "missing": values[3::3]}


def _function_of(column, labels: Sequence[str], several: str, other: str):
    """A stored call's function (a plain label, or the ``function`` of canonical JSON) as one
    of ``labels``, ``several`` for calls to several functions, or ``other``."""
    name = case((column.like("{%"), json_text(column, FUNCTION)), else_=column)
    return case(
        (name.in_(list(labels)), func.substr(name, 1, LABEL_CHARS)),
        (name.like("%+%"), literal(several)),
        else_=literal(other),
    )


def function_confusion(
    conn: Connection, run_id: int, labels: Sequence[str], several: str, other: str
) -> list[tuple[str, str, int]]:
    """(expected function, called function, items) over the run's scored items."""
    i = prompt_run_item
    expected = _function_of(i.c.expected_decision, labels, several, other)
    actual = _function_of(i.c.actual_decision, labels, several, other)
    rows = conn.execute(
        select(expected, actual, func.count())
        .where(i.c.run_id == run_id, i.c.verdict.in_(SCORED))
        .group_by(expected, actual)
    )
    return [(e, a, int(n)) for e, a, n in cast("Iterable[tuple[str, str, int]]", rows)]  # the columns' types


def argument_flips(
    conn: Connection, run_id: int, baseline_run_id: int, pairs: Sequence[tuple[int, int]]
) -> list[dict[str, int]]:
    """Per (candidate bit, live bit) of a field both decide, over the items both scored
    and both compared it on: how many, live right, fixed, broken."""
    cand, live = paired_items()
    columns = []
    for cand_bit, live_bit in pairs:
        both = _compared(cand, cand_bit) & _compared(live, live_bit)
        right_now, right_before = ~_has(cand.c.fields_wrong, cand_bit), ~_has(live.c.fields_wrong, live_bit)
        columns += [
            _count(both),
            _count(both & right_before),
            _count(both & right_now & ~right_before),
            _count(both & ~right_now & right_before),
        ]
    values = paired_counts(conn, run_id, baseline_run_id, (cand, live), columns)
    keys = ("paired", "live_right", "fixed", "broken")
    return [dict(zip(keys, values[4 * k : 4 * k + 4])) for k in range(len(pairs))]


def marked_counts(conn: Connection, run_id: int, markers: dict[str, tuple[str, str]]) -> dict[str, int]:
    """Per name, the scored items whose reading is the marker (a label decision's) or begins
    with the prefix (canonical JSON's): ``markers`` maps a name to (marker, prefix)."""
    i = prompt_run_item
    actual = i.c.actual_decision
    names = list(markers)
    columns = [_count(or_(actual == markers[n][0], actual.like(markers[n][1] + "%"))) for n in names]
    row = conn.execute(select(*columns).where(i.c.run_id == run_id, i.c.verdict.in_(SCORED))).first()
    assert row is not None  # counts without GROUP BY: always one row
    return {n: int(v) for n, v in zip(names, cast("tuple[int, ...]", row))}  # counts


def parallel_counts(conn: Connection, run_id: int, pattern: str) -> dict[str, int]:
    """Items expecting several calls (their expected value is ``LIKE pattern``), items
    answered with several, and expected so and right."""
    i = prompt_run_item
    expected, answered = i.c.expected_decision.like(pattern), i.c.actual_decision.like(pattern)
    row = conn.execute(
        select(_count(expected), _count(answered), _count(expected & (i.c.verdict == Verdict.MATCH))).where(
            i.c.run_id == run_id, i.c.verdict.in_(SCORED)
        )
    ).first()
    assert row is not None  # counts without GROUP BY: always one row
    return {"expected": int(row[0]), "answered": int(row[1]), "right": int(row[2])}
