"""Answers kept for reuse (``answer``): a model's answer to one request, kept under its
request key (``gate.prompt.request_keys.request_key``), saved by execute with the chunk that paid for it
and found again when a later run sends the very same request; and how many of each run's
answers were reused."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

from sqlalchemy import bindparam, func, insert, select
from sqlalchemy.engine import Connection

from gate.records import Answer
from gate.states import RUN_TERMINAL

from .dialect import db_now
from .schema import answer, prompt_run, prompt_run_item
from .textsql import execute_text, rows_template, string_literal, template


def reuse_stats(conn: Connection, run_ids: Sequence[int]) -> dict[int, dict[int, int]]:
    """Per run: how many of its answers came from which earlier update."""
    i = prompt_run_item
    found: dict[int, dict[int, int]] = {rid: {} for rid in run_ids}
    if run_ids:
        rows = conn.execute(
            select(i.c.run_id, i.c.reused_update_id, func.count())
            .where(i.c.run_id.in_(list(run_ids)), i.c.reused_update_id.is_not(None))
            .group_by(i.c.run_id, i.c.reused_update_id)
        )
        for run_id, update_id, n in cast("Iterable[tuple[int, int, int]]", rows):  # the columns' types
            found[run_id][update_id] = n
    return found


def find_answers(conn: Connection, keys: Sequence[str]) -> dict[str, Answer]:
    """The answers already paid for among these request keys whose run is finished (a
    primary-key lookup each, and the run's)."""
    if not keys:
        return {}
    params = {"keys": sorted(set(keys))}
    quote = string_literal(conn)
    if quote is not None:  # the text form (a chunk's 256 keys bound through SQLAlchemy cost more CPU than the read)
        rows = execute_text(conn, template("find_answers", lambda: _FIND_ANSWERS, conn, quote)(params))
    else:
        rows = conn.execute(_FIND_ANSWERS, params)
    return {
        key: Answer(key, decision, raw, latency, prompt, completion, update_id, run_id)
        for key, decision, raw, latency, prompt, completion, update_id, run_id in cast(
            "Iterable[tuple[str, str, str | None, int | None, int | None, int | None, int, int]]", rows
        )  # the columns' types (_find_answers_statement's, in its order)
    }


def _find_answers_statement():
    """``find_answers``' read: the one definition of its SQLAlchemy and text forms."""
    a, r = answer, prompt_run
    return (
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
        .select_from(a)
        .join(r, r.c.id == a.c.run_id)
        .where(a.c.request_key.in_(bindparam("keys", expanding=True)), r.c.status.in_(sorted(RUN_TERMINAL)))
    )


ANSWER_COLUMNS = (
    "request_key",
    "actual_decision",
    "raw_output",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "update_id",
    "run_id",
    "trial_of",
)


def save_answers(conn: Connection, answers: Sequence[Answer]) -> None:
    """Keep new answers for reuse. A kept answer is the first the gate obtained for its
    request and is never replaced (INSERT IGNORE): no sequence of submissions can swap in
    an answer it liked better, so what an apply reuses cannot be cherry-picked. Runs that
    asked for fresh calls (``--no-reuse``) keep theirs to themselves (the caller does not
    save them).

    On PyMySQL the chunk's answers go as one multi-row statement (a few for very long
    answers): bound through the driver, the statement's ``UTC_TIMESTAMP(6)`` among the
    VALUES kept PyMySQL's ``executemany`` from folding the rows into one INSERT, one
    statement per answer (bench/README.md, the database path)."""
    if not answers:
        return
    answers = sorted(answers, key=lambda a: a.request_key)  # one key order: no deadlock
    quote = string_literal(conn)
    if quote is not None:
        columns = {column: [getattr(a, column) for a in answers] for column in ANSWER_COLUMNS}
        for statement in rows_template("save_answers", lambda: _SAVE_ANSWERS, conn, quote).statements(columns):
            execute_text(conn, statement)
        return
    conn.execute(_SAVE_ANSWERS, [{column: getattr(a, column) for column in ANSWER_COLUMNS} for a in answers])


def _save_answers_statement():
    """``save_answers``' INSERT IGNORE of one answer, ``created_at`` the database's clock: the
    one definition of its SQLAlchemy form (executemany) and its text form's rows."""
    values = {column: bindparam(column, type_=answer.c[column].type) for column in ANSWER_COLUMNS}
    return (
        insert(answer)
        .values(**values, created_at=db_now())
        .prefix_with("IGNORE", dialect="mysql")
        .prefix_with("OR IGNORE", dialect="sqlite")
    )


_FIND_ANSWERS, _SAVE_ANSWERS = _find_answers_statement(), _save_answers_statement()
