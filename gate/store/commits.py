"""``commit_record``: what the Action's push job did for a commit — the apply-mode updates it
submitted, that nothing needed gating, or that it could not gate the commit (and why, in
one line). `wait --sha` answers from it for a commit with no apply-mode update. One row per
commit; a re-run of the job replaces it."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.engine import Connection

from gate.records import CommitRecord

from .dialect import db_now
from .schema import commit_record


def write_commit_record(
    conn: Connection,
    sha: str,
    outcome: str,
    update_ids: list[int],
    detail: str | None,
    repo: str | None,
    ref: str | None,
    recorded_by: str | None,
) -> None:
    """Record (or replace) the commit's record, in one upsert: two records of one commit at
    once (a re-run of the push job beside the first) end with one of them, never with a
    duplicate key (an update then an insert raced: the second insert failed)."""
    values = {
        "outcome": outcome,
        "update_ids": list(update_ids),
        "detail": detail,
        "repo": repo,
        "ref": ref,
        "recorded_by": recorded_by,
        "recorded_at": db_now(),
    }
    if conn.dialect.name == "mysql":
        upsert = mysql.insert(commit_record).values(sha=sha, **values)
        conn.execute(upsert.on_duplicate_key_update(**{k: upsert.inserted[k] for k in values}))
        return
    insert = sqlite.insert(commit_record).values(sha=sha, **values)
    conn.execute(insert.on_conflict_do_update(index_elements=["sha"], set_={k: insert.excluded[k] for k in values}))


def find_commit_record(conn: Connection, sha: str) -> CommitRecord | None:
    row = conn.execute(select(commit_record).where(commit_record.c.sha == sha)).first()
    if row is None:
        return None
    return CommitRecord(
        sha=row.sha,
        outcome=row.outcome,
        update_ids=tuple(row.update_ids or ()),
        detail=row.detail,
        repo=row.repo,
        ref=row.ref,
        recorded_by=row.recorded_by,
        recorded_at=row.recorded_at,
    )
