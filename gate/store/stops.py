"""A run's running counts (``prompt_run_tally``) and the stop of an update before all its
items are called (early stop, gate/verdict/early_stop.py; a spend cap, gate/calls/spend_caps.py).

The tally is added to in each executor write-back's own transaction, by one multi-row
``INSERT … ON DUPLICATE KEY UPDATE`` (SQLite: ``ON CONFLICT DO UPDATE``) of what the
write-back counted from the results it wrote (``add_tally``'s ``outcomes``; the paired live
run's verdicts at the same positions read by key) and the calls the chunk made; given
positions instead, an ``INSERT … SELECT`` reads the items back (``_outcome_rows``, which
reconcile also counts a run's items by). What it costs does not grow with the items the
run has scored. Reading it is one read of a few dozen rows.

The stop is one transaction, in the lock order of a cancellation (the update's row, then
its runs', then their items): a guarded UPDATE of the update (still open, not stopped:
one stopper wins), each open run marked stopped (guarded: still open, not stopped), and
every item still PENDING of those runs — leased or not — made STOPPED with its lease
token cleared, so a call in flight finishes but its write-back, guarded by that token,
writes nothing: a stopped item is never resurrected or counted twice."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    DateTime,
    Integer,
    String,
    and_,
    bindparam,
    func,
    insert,
    literal,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import BindParameter, ColumnElement
from sqlalchemy.sql.selectable import FromClause, Select

from gate.states import RUN_OPEN, UPDATE_OPEN, RunStatus, Verdict

from .dialect import db_now
from .runs import pending_items
from .schema import EPOCH, prompt_run, prompt_run_item, prompt_run_tally, prompt_update
from .textsql import execute_text, rows_template, string_literal

CALLS = "CALLS"  # the tally row of the model calls a run made (recorded by its write-backs)
CLAIMED = "CLAIMED"  # ... of its items' claims (added by each claim, less those given back uncalled)
SETTLED = "SETTLED"  # ... of the claims whose write-back recorded their calls (written or not)
# CLAIMED and SETTLED rows name, in expected_decision and actual_decision, the executor that
# claimed (its tag: one per process, never reused) and its bound (the most of its claims that
# may have made calls not on record at once: workers.execute.ledger); '' and '' before issue 51
CLAIM_ROWS = (CLAIMED, SETTLED)
COUNTS = (CALLS, CLAIMED, SETTLED)  # rows that count, not items by verdict
STRIPES = 16
TALLY_KEY = ("run_id", "stripe", "verdict", "expected_decision", "actual_decision", "live_verdict")
WRITTEN = [Verdict.MATCH, Verdict.MISMATCH, Verdict.ERROR]


def stripe_of(token: str, part: int = 0) -> int:
    """The tally stripe a write-back adds to: from its claim's random token, and which of
    the claim's write-backs it is (``part``: write-backs of one claim at once add to
    different rows, so neither waits for the other's lock)."""
    return (int(token[:2], 16) + part) % STRIPES if token else part % STRIPES


def add_tally(
    conn: Connection,
    run_id: int,
    stripe: int,
    positions: Sequence[int] | None,
    live_run_id: int | None,
    calls: int,
    by_label: bool = True,
    *,
    claimed: int = 0,
    settled: int = 0,
    claimer: str = "",
    bound: int = 0,
    outcomes: Sequence[Outcome] | None = None,
) -> None:
    """Add a write-back (or a claim) to its run's tally, in its transaction: the items at
    ``positions`` (just written: MATCH, MISMATCH, ERROR; None: none to count) by verdict,
    expected label, answer and ``live_run_id``'s verdict at the same position; ``calls``
    model calls; ``claimed`` claims of items (negative: claims given back uncalled) and
    ``settled`` claims whose calls this write-back records, both of executor ``claimer``
    whose ``bound`` caps them (``unrecorded_claims``). ``by_label`` False (a decision
    field by field, whose expected and read values are JSON objects: one per item, and
    longer than the tally's key): counted without them, as '' — the bars judged early
    then are accuracy and those against live (``gate.verdict.early_stop``: its labels are
    not complete).

    ``outcomes`` instead of ``positions``: the just-written items as the write-back has them
    in hand, (position, verdict, expected, answer), counted here rather than read back
    (``_add_counted``); the same rows as ``positions`` would add."""
    amounts = {name: int(n) for name, n in ((CALLS, calls), (CLAIMED, claimed), (SETTLED, settled)) if n}
    who = (claimer, str(int(bound))) if claimer else ("", "")  # a claim row's executor and its bound
    if outcomes:
        _add_counted(conn, run_id, stripe, outcomes, live_run_id, by_label, amounts, who)
        return
    counted = bool(positions)
    if not counted and not amounts:
        return
    stmt = _tally_statement(conn.dialect.name, counted, tuple(amounts), live_run_id is not None, by_label)
    params = _bound(run_id, stripe, live_run_id)
    if counted:
        assert positions is not None  # counted: positions given, and not empty
        params[POSITIONS.key] = [int(p) for p in positions]
    params.update({AMOUNT[name].key: n for name, n in amounts.items()})
    if claimed or settled:
        params[CLAIMER.key], params[BOUND.key] = who
    conn.execute(stmt, params)


def add_claims(
    conn: Connection,
    run_id: int,
    token: str,
    who: dict[str, Any],
    *,
    claimed: int = 0,
    settled: int = 0,
    calls: int = 0,
) -> None:
    """A claim's items added to (``claimed``), given back from (negative) or settled in
    (``settled``, with the ``calls`` they made) its run's tally, named by the executor ``who``
    (``claimer`` and ``bound``, as ``add_tally`` takes them): no items counted."""
    add_tally(conn, run_id, stripe_of(token), None, None, calls, claimed=claimed, settled=settled, **who)


def record_bound(conn: Connection, run_id: int, claimer: str, bound: int) -> None:
    """Executor ``claimer``'s raised ``bound``, recorded in a run it claimed items of before
    (a CLAIMED row of no claims: ``unrecorded_claims`` takes its largest bound)."""
    stmt = _tally_statement(conn.dialect.name, False, (CLAIMED,), False, True)
    params = _bound(run_id, 0, None)
    params.update({AMOUNT[CLAIMED].key: 0, CLAIMER.key: claimer, BOUND.key: str(int(bound))})
    conn.execute(stmt, params)


Outcome = tuple[int, str, str, "str | None"]  # a written item: position, verdict, expected, answer


def _add_counted(
    conn: Connection,
    run_id: int,
    stripe: int,
    outcomes: Sequence[Outcome],
    live_run_id: int | None,
    by_label: bool,
    amounts: dict[str, int],
    who: tuple[str, str] = ("", ""),
) -> None:
    """``add_tally`` from the results in hand: the items counted by (verdict, expected,
    answer, live verdict) here, the live run's verdicts at their positions read (a key
    lookup each; the live run is finished, ``workers.execute.early_stop.live_pair``), and
    one multi-row upsert of the counts and ``amounts``. What ``_outcome_rows`` would read
    back from the items just written, without reading them: a chunk's re-read was the
    tally's cost on every write-back (bench/README.md, P4)."""
    written = [o for o in outcomes if o[1] in WRITTEN]
    live = _live_verdicts(conn, live_run_id, [o[0] for o in written]) if live_run_id is not None else {}
    counts: Counter[tuple[str, str, str, str]] = Counter(
        (str(verdict), expected if by_label else "", (actual or "") if by_label else "", live.get(position, ""))
        for position, verdict, expected, actual in written
    )
    keys = [*counts, *((name, *(who if name in CLAIM_ROWS else ("", "")), "") for name in amounts)]
    if not keys:
        return
    ns = [*counts.values(), *amounts.values()]
    columns: dict[str, Any] = {"run_id": int(run_id), "stripe": int(stripe), "n": ns}
    columns.update({name: [key[k] for key in keys] for k, name in enumerate(TALLY_KEY[2:])})
    _upsert_counts(conn, columns)


def _upsert_counts(conn: Connection, columns: dict[str, Any]) -> None:
    """The tally's rows given by column (a list per column, or one value for every row)
    added in one multi-row upsert: on PyMySQL its text (``textsql``: the statement built
    through SQLAlchemy per write-back cost more CPU than the server's work), elsewhere the
    statement, executemany."""
    quote = string_literal(conn)
    if quote is None:
        n = len(columns["n"])
        rows = [{c: v[k] if isinstance(v, list) else v for c, v in columns.items()} for k in range(n)]
        conn.execute(_counted_statement(conn.dialect.name), rows)
        return
    tail = _counted_tail(conn.dialect)
    for statement in rows_template("tally_counts", _counted_row, conn, quote).statements(columns):
        execute_text(conn, statement + tail)


def _live_verdicts(conn: Connection, live_run_id: int, positions: list[int]) -> dict[int, str]:
    """The live run's verdicts at ``positions`` (a position it lacks: none, as the join's '')."""
    if not positions:
        return {}
    i = prompt_run_item
    found = conn.execute(
        select(i.c.position, i.c.verdict).where(i.c.run_id == int(live_run_id), i.c.position.in_(positions))
    )
    return {int(position): verdict or "" for position, verdict in cast("Iterable[tuple[int, str]]", found)}


def _row_values() -> dict[str, BindParameter]:
    return {name: bindparam(name, type_=prompt_run_tally.c[name].type) for name in (*TALLY_KEY, "n")}


def _counted_row():
    """One tally row's INSERT, its values as parameters: the row of the upsert's text form."""
    return insert(prompt_run_tally).values(_row_values())


@functools.cache
def _counted_tail(dialect) -> str:
    """The text after the upsert's rows (MySQL: its ON DUPLICATE KEY UPDATE), from the one
    definition of the upsert (``_counted_statement``) compiled for ``dialect``."""
    row = str(_counted_row().compile(dialect=dialect))
    upsert = str(_counted_statement("mysql").values(_row_values()).compile(dialect=dialect))
    assert upsert.startswith(row), "the upsert is the row's INSERT and a tail"
    return upsert[len(row) :]


@functools.cache
def _counted_statement(dialect: str):
    """The tally's upsert of rows given as values (executemany: one multi-row statement)."""
    t = prompt_run_tally
    if dialect == "mysql":
        mysql_upsert = mysql.insert(t)
        return mysql_upsert.on_duplicate_key_update(n=t.c.n + mysql_upsert.inserted.n)
    sqlite_upsert = sqlite.insert(t)
    return sqlite_upsert.on_conflict_do_update(
        index_elements=list(TALLY_KEY), set_={"n": t.c.n + sqlite_upsert.excluded.n}
    )


def _bound(run_id: int, stripe: int, live_run_id: int | None) -> dict[str, Any]:
    params: dict[str, Any] = {RUN.key: int(run_id), STRIPE.key: int(stripe)}
    if live_run_id is not None:
        params[LIVE_RUN.key] = int(live_run_id)
    return params


RUN, STRIPE, LIVE_RUN = (
    bindparam("tally_run", type_=BigInteger),
    bindparam("tally_stripe", type_=Integer),
    bindparam("tally_live_run", type_=BigInteger),
)
POSITIONS: BindParameter[int] = bindparam("tally_positions", expanding=True)
CLAIMER, BOUND = bindparam("tally_claimer", type_=String), bindparam("tally_bound", type_=String)
AMOUNT = {name: bindparam(f"tally_{name.lower()}", type_=BigInteger) for name in COUNTS}


def _amount_row(name: str, blank: ColumnElement[str]) -> Select[Any]:
    """The tally row adding one amount: its claimer and bound named for the claim rows,
    blank for the others."""
    claimer, bound = (CLAIMER, BOUND) if name in CLAIM_ROWS else (blank, blank)
    return select(RUN, STRIPE, literal(name, String), claimer, bound).add_columns(blank, AMOUNT[name])


@functools.cache
def _tally_statement(dialect: str, counted: bool, amounts: tuple[str, ...], live: bool, by_label: bool):
    """``add_tally``'s statement for one shape, built once with its values as parameters:
    on every write-back, building it anew (an alias, a join, a union, an upsert) was a
    tenth of a P4 worker's GIL time (bench/README.md, the database path)."""
    parts: list[Select[Any]] = []
    if counted:
        parts.append(_outcome_rows(live, True, by_label))
    blank = literal("", String)
    parts += [_amount_row(name, blank) for name in amounts]
    rows = parts[0] if len(parts) == 1 else union_all(*parts)
    return _upsert(dialect, rows)


@functools.cache
def _outcome_rows(live: bool, at_positions: bool, by_label: bool):
    """(run, stripe, verdict, expected, answer, live verdict, n) of run ``RUN``'s written
    items (those at ``POSITIONS`` when ``at_positions``), each paired with ``LIVE_RUN``'s
    verdict at the same position when ``live``; without ``by_label``, expected and answer
    ''. Built once per shape; the values are bound at execution."""
    c = prompt_run_item.alias("c")
    where = [c.c.run_id == RUN, c.c.verdict.in_(WRITTEN)]
    if at_positions:
        where.append(c.c.position.in_(POSITIONS))
    actual = func.coalesce(c.c.actual_decision, "") if by_label else literal("", String)
    expected = c.c.expected_decision if by_label else literal("", String)
    live_verdict: ColumnElement[str]
    source: FromClause
    if not live:
        live_verdict, source = literal("", String), c
    else:
        other = prompt_run_item.alias("l")
        live_verdict = func.coalesce(other.c.verdict, "")
        source = c.outerjoin(other, and_(other.c.run_id == LIVE_RUN, other.c.position == c.c.position))
    return (
        select(RUN, STRIPE, c.c.verdict, expected, actual, live_verdict, func.count())
        .select_from(source)
        .where(*where)
        .group_by(c.c.verdict, expected, actual, live_verdict)
    )


def _upsert(dialect: str, rows):
    t = prompt_run_tally
    columns = [*TALLY_KEY, "n"]
    if dialect == "mysql":
        mysql_upsert = mysql.insert(t).from_select(columns, rows)
        return mysql_upsert.on_duplicate_key_update(n=t.c.n + mysql_upsert.inserted.n)
    sqlite_upsert = sqlite.insert(t).from_select(columns, select(rows.subquery()).where(literal(True)))
    return sqlite_upsert.on_conflict_do_update(
        index_elements=list(TALLY_KEY), set_={"n": t.c.n + sqlite_upsert.excluded.n}
    )


def read_tally(conn: Connection, run_id: int) -> tuple[list[tuple[str, str, str | None, str, int]], int]:
    """The run's tally, its stripes summed: (verdict, expected, answer or None, live verdict,
    items) rows, and the model calls it made."""
    t = prompt_run_tally
    rows: list[tuple[str, str, str | None, str, int]] = []
    calls = 0
    summed = conn.execute(
        select(t.c.verdict, t.c.expected_decision, t.c.actual_decision, t.c.live_verdict, func.sum(t.c.n))
        .where(t.c.run_id == run_id)
        .group_by(t.c.verdict, t.c.expected_decision, t.c.actual_decision, t.c.live_verdict)
    )
    # the columns' types; a SUM is a Decimal on MySQL
    for verdict, expected, actual, live, n in cast("Iterable[tuple[str, str, str, str, int | Decimal]]", summed):
        if verdict == CALLS:
            calls += int(n)
        elif verdict not in COUNTS:
            rows.append((verdict, expected, actual or None, live, int(n)))
    return rows, calls


def unrecorded_claims(conn: Connection, run_id: int) -> int:
    """The run's claims whose calls may have been made and never recorded, as tight as the
    records allow and never fewer: of each executor that claimed, its claims not given
    back that no write-back settled (a worker killed holding them, a write-back that never
    got through; of an open run, the claims in hand too), but no more than the largest
    bound it recorded (its calls unrecorded at any moment: workers.execute.ledger) — a claim counts its items
    before any call, and the ones queued behind the calls never made one. Claims before
    issue 51 name no executor: each counts. (A run tallied before migration 17 counted no
    claims: none.)"""
    t = prompt_run_tally
    rows = conn.execute(
        select(t.c.expected_decision, t.c.actual_decision, t.c.verdict, func.sum(t.c.n))
        .where(t.c.run_id == run_id, t.c.verdict.in_(CLAIM_ROWS))
        .group_by(t.c.expected_decision, t.c.actual_decision, t.c.verdict)
    )
    open_claims: dict[str, int] = {}
    bounds: dict[str, int] = {}
    for claimer, bound, verdict, n in cast("Iterable[tuple[str, str, str, int | Decimal]]", rows):
        sign = 1 if verdict == CLAIMED else -1
        open_claims[claimer] = open_claims.get(claimer, 0) + sign * int(n)
        if claimer and bound.isdigit():  # its largest on record: the one it may have used last
            bounds[claimer] = max(bounds.get(claimer, 0), int(bound))
    return sum(_capped(n, bounds.get(claimer)) for claimer, n in open_claims.items())


def _capped(claims: int, bound: int | None) -> int:
    """An executor's unsettled claims, no more than its bound (none named: all of them)."""
    return min(max(0, claims), bound) if bound is not None else max(0, claims)


def outcome_counts(
    conn: Connection, run_id: int, live_run_id: int | None, by_label: bool = True
) -> list[tuple[str, str, str | None, str, int]]:
    """The tally's rows counted from the run's items themselves (reconcile confirms an
    early stop on them): (verdict, expected, answer or None, live verdict, items)."""
    return [
        (v, e, a or None, live, int(n))
        for _, _, v, e, a, live, n in cast(
            "Iterable[tuple[int, int, str, str, str, str, int]]",  # the columns' types
            conn.execute(_outcome_rows(live_run_id is not None, False, by_label), _bound(run_id, 0, live_run_id)),
        )
    ]


def delete_tally(conn: Connection, run_id: int) -> int:
    """A pruned run's tally goes with its items."""
    t = prompt_run_tally
    return conn.execute(t.delete().where(t.c.run_id == run_id)).rowcount


# --- the stop ------------------------------------------------------------------------------------


def stop_update(
    conn: Connection, update_id: int, kind: str, run_id: int | None, info: dict[str, Any], sibling_kind: str
) -> dict[int, int]:
    """Stop the update's open runs before their remaining items are called (see the module
    docstring): run ``run_id`` marked ``kind``, the others ``sibling_kind``. Returns run id
    → items stopped; empty when the update was not open, or stopped already (by another
    worker: one stopper wins)."""
    u, r = prompt_update, prompt_run
    if (
        conn.execute(
            update(u)
            .where(u.c.id == update_id, u.c.status.in_(sorted(UPDATE_OPEN)), u.c.stopped.is_(None))
            .values(stopped=info)
        ).rowcount
        != 1
    ):
        return {}
    stopped: dict[int, int] = {}
    runs = conn.execute(
        select(r.c.id, r.c.status)
        .where(r.c.update_id == update_id, r.c.status.in_(sorted(RUN_OPEN)))
        .order_by(r.c.id)
        .with_for_update()
    ).all()
    for rid, status in cast("list[tuple[int, str]]", runs):  # the columns' types
        values: dict[str, Any] = {"stopped": kind if rid == run_id else sibling_kind}
        if status == RunStatus.RUNNING:  # no further page: finalize takes it once its items are stopped
            values.update(
                materialized_at=func.coalesce(r.c.materialized_at, db_now()),
                lease_token=None,
                lease_until=literal(EPOCH, DateTime()),
            )
        if (
            conn.execute(
                update(r).where(r.c.id == rid, r.c.status == status, r.c.stopped.is_(None)).values(**values)
            ).rowcount
            == 1
        ):
            stopped[rid] = stop_items(conn, rid)
    return stopped


def stop_items(conn: Connection, run_id: int) -> int:
    """Every item of the run still PENDING, leased or not: STOPPED, its lease token
    cleared (a write-back in flight then writes nothing)."""
    i = prompt_run_item
    return conn.execute(
        update(i)
        .where(i.c.run_id == run_id, i.c.verdict == Verdict.PENDING)
        .values(verdict=Verdict.STOPPED, lease_token=None, lease_until=literal(EPOCH, DateTime()))
    ).rowcount


def update_has_uncalled(conn: Connection, update_id: int) -> bool:
    """Whether a stop of the update would save a call: one of its open runs still has rows
    to copy, or an item nobody holds (one index probe per run, on the ready index; asked
    only of a run found settled). Items all in flight or waiting for a retry: no."""
    r = prompt_run
    for run_id, materialized in conn.execute(
        select(r.c.id, r.c.materialized_at).where(r.c.update_id == update_id, r.c.status.in_(sorted(RUN_OPEN)))
    ).all():
        if materialized is None:
            return True
        if conn.execute(
            pending_items()
            .where(prompt_run_item.c.run_id == run_id, prompt_run_item.c.lease_until <= db_now())
            .limit(1)
        ).first():
            return True
    return False


def run_stopped(conn: Connection, run_id: int) -> bool:
    """Whether the run was stopped (a write-back that lost its lease asks)."""
    return conn.execute(select(prompt_run.c.stopped).where(prompt_run.c.id == run_id)).scalar() is not None


def count_uncalled(conn: Connection, run_id: int) -> int:
    """Stopped items never claimed (no claim, or each one given back uncalled) and without
    an attempt on record (before migration 17 a claim counted one): no call was ever made
    for them."""
    i = prompt_run_item
    return int(
        conn.execute(
            select(func.count()).where(
                i.c.run_id == run_id, i.c.verdict == Verdict.STOPPED, i.c.claims == 0, i.c.attempt == 0
            )
        ).scalar_one()
    )
