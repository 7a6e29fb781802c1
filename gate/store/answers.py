"""Answers kept for reuse (``answer``): a model's answer to one request, kept under its
request key (``gate.prompt.request_keys.request_key``), saved by execute with the chunk that paid for it
and found again when a later run sends the very same request; and how many of each run's
answers were reused."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, insert, select
from sqlalchemy.engine import Connection

from gate.records import Answer
from gate.states import RUN_TERMINAL

from .dialect import db_now
from .schema import answer, prompt_run, prompt_run_item
from .textsql import answers_found_sql, answers_insert_sql, string_literal


def reuse_stats(conn: Connection, run_ids: Sequence[int]) -> dict[int, dict[int, int]]:
    """Per run: how many of its answers came from which earlier update."""
    i = prompt_run_item
    found: dict[int, dict[int, int]] = {rid: {} for rid in run_ids}
    if run_ids:
        for run_id, update_id, n in conn.execute(
            select(i.c.run_id, i.c.reused_update_id, func.count())
            .where(i.c.run_id.in_(list(run_ids)), i.c.reused_update_id.is_not(None))
            .group_by(i.c.run_id, i.c.reused_update_id)
        ):
            found[run_id][update_id] = n
    return found


def find_answers(conn: Connection, keys: Sequence[str]) -> dict[str, Answer]:
    """The answers already paid for among these request keys whose run is finished (a
    primary-key lookup each, and the run's)."""
    if not keys:
        return {}
    quote = string_literal(conn)
    if quote is not None:
        rows = conn.exec_driver_sql(
            answers_found_sql(sorted(set(keys)), quote), execution_options={"no_parameters": True}
        )
        return {row[0]: Answer(*row) for row in rows}
    a, r = answer, prompt_run
    rows = conn.execute(
        select(
            a.c.request_key,
            a.c.actual_decision,
            a.c.raw_output,
            a.c.latency_ms,
            a.c.prompt_tokens,
            a.c.completion_tokens,
            a.c.update_id,
            a.c.run_id,
        )
        .join(r, r.c.id == a.c.run_id)
        .where(a.c.request_key.in_(sorted(set(keys))), r.c.status.in_(sorted(RUN_TERMINAL)))
    )
    return {row.request_key: Answer(*row) for row in rows}


def save_answers(conn: Connection, answers: Sequence[Answer]) -> None:
    """Keep new answers for reuse. A kept answer is the first the gate obtained for its
    request and is never replaced (INSERT IGNORE): no sequence of submissions can swap in
    an answer it liked better, so what an apply reuses cannot be cherry-picked. Runs that
    asked for fresh calls (``--no-reuse``) keep theirs to themselves (the caller does not
    save them)."""
    if not answers:
        return
    answers = sorted(answers, key=lambda a: a.request_key)  # one key order: no deadlock
    quote = string_literal(conn)
    if quote is not None:
        for statement in answers_insert_sql(answers, quote):
            conn.exec_driver_sql(statement, execution_options={"no_parameters": True})
        return
    rows = [
        {
            "request_key": a.request_key,
            "actual_decision": a.actual_decision,
            "raw_output": a.raw_output,
            "latency_ms": a.latency_ms,
            "prompt_tokens": a.prompt_tokens,
            "completion_tokens": a.completion_tokens,
            "update_id": a.update_id,
            "run_id": a.run_id,
            "trial_of": a.trial_of,
        }
        for a in answers
    ]
    stmt = (
        insert(answer)
        .values(created_at=db_now())
        .prefix_with("IGNORE", dialect="mysql")
        .prefix_with("OR IGNORE", dialect="sqlite")
    )
    conn.execute(stmt, rows)
