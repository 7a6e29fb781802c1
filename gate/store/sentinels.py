"""Sentinels (``prompt_run_sentinel``): a judged run's sample of its judge's
human-labelled items, staged with the run at submit (copied from the judge's evaluated
dataset version, server side), judged by the executor beside the run's items and written
back with them, counted after each write-back and by finalize (gate.verdict.judge_stats:
drift)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import BigInteger, Integer, bindparam, delete, func, insert, literal, select, update
from sqlalchemy.engine import Connection

from gate.records import Sentinel, SentinelResult
from gate.states import Verdict, sentinel_sources

from .dialect import db_now
from .schema import dataset_row, prompt_run_sentinel


def insert_sentinels(conn: Connection, run_id: int, picks: Sequence[tuple[int, int, int]], version_id: int) -> int:
    """Stage sentinels: for each (number, row position in ``version_id``, ride position), the
    row copied by one INSERT ... SELECT (no row crosses the network)."""
    s, r = prompt_run_sentinel, dataset_row
    staged = 0
    for number, position, ride in picks:
        rows = select(
            literal(int(run_id), BigInteger),
            literal(int(number), Integer),
            literal(int(ride), BigInteger),
            r.c.item_id,
            r.c.input,
            r.c.expected_decision,
        ).where(r.c.version_id == version_id, r.c.position == position)
        columns = [s.c.run_id, s.c.sentinel, s.c.ride_position, s.c.item_id, s.c.input, s.c.expected_decision]
        staged += conn.execute(insert(s).from_select(columns, rows)).rowcount
    return staged


def run_sentinels(conn: Connection, run_id: int) -> list[Sentinel]:
    """The run's sentinels still to judge."""
    s = prompt_run_sentinel
    rows = conn.execute(
        select(s.c.sentinel, s.c.ride_position, s.c.item_id, s.c.input, s.c.expected_decision)
        .where(s.c.run_id == run_id, s.c.verdict == Verdict.PENDING)
        .order_by(s.c.sentinel)
    )
    return [Sentinel(row[0], row[1], row[2], row[3], row[4]) for row in rows]


def write_sentinel_results(conn: Connection, run_id: int, results: Sequence[SentinelResult]) -> int:
    """The judge's answers on sentinels, each written once (guarded: still PENDING); called
    in the write-back transaction of the items they were judged beside, once those items'
    rows were written under their lease."""
    if not results:
        return 0
    (source,) = {f for x in results for f in sentinel_sources(x.verdict)}  # PENDING: each is judged once
    s = prompt_run_sentinel
    statement = (
        update(s)
        .where(s.c.run_id == bindparam("r"), s.c.sentinel == bindparam("n"), s.c.verdict == source)
        .values(
            verdict=bindparam("v"),
            actual_decision=bindparam("a"),
            raw_output=bindparam("o"),
            calls=bindparam("c"),
            prompt_tokens=bindparam("pt"),
            completion_tokens=bindparam("ct"),
            judged_at=db_now(),
        )
    )
    params = [
        {
            "r": run_id,
            "n": x.number,
            "v": x.verdict,
            "a": x.actual_decision,
            "o": x.raw_output,
            "c": x.calls,
            "pt": x.prompt_tokens,
            "ct": x.completion_tokens,
        }
        for x in results
    ]
    return conn.execute(statement, params).rowcount


def sentinel_outcomes(conn: Connection, run_id: int) -> tuple[list[bool], int]:
    """The judged sentinels' outcomes in the order the judge answered them (True: it agreed;
    by the write-back that recorded them, then by the item they rode on, as the executor
    calls them) and how many were staged: what the drift test reads."""
    s = prompt_run_sentinel
    rows = conn.execute(
        select(s.c.verdict, s.c.judged_at)
        .where(s.c.run_id == run_id)
        .order_by(s.c.judged_at, s.c.ride_position, s.c.sentinel)
    ).all()
    judged = [verdict == Verdict.MATCH for verdict, _judged_at in rows if verdict != Verdict.PENDING]
    return judged, len(rows)


def sentinel_calls(conn: Connection, run_id: int) -> tuple[int, int, int, int]:
    """(calls, prompt tokens, completion tokens, answers without token counts) of the
    judge's calls on the run's sentinels."""
    s = prompt_run_sentinel
    unmetered = func.sum(
        ((s.c.calls > 0) & (s.c.prompt_tokens.is_(None) | s.c.completion_tokens.is_(None))).cast(Integer)
    )
    row = conn.execute(
        select(
            func.coalesce(func.sum(s.c.calls), 0),
            func.coalesce(func.sum(s.c.prompt_tokens), 0),
            func.coalesce(func.sum(s.c.completion_tokens), 0),
            func.coalesce(unmetered, 0),
        ).where(s.c.run_id == run_id)
    ).one()
    return int(row[0]), int(row[1]), int(row[2]), int(row[3])


def delete_run_sentinels(conn: Connection, run_id: int) -> int:
    """A pruned run's sentinels (a run has at most a few hundred)."""
    return conn.execute(delete(prompt_run_sentinel).where(prompt_run_sentinel.c.run_id == run_id)).rowcount
