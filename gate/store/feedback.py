"""Production's outcomes of a canary rollout's calls (``rollout_feedback``) and their running
counts (``rollout_tally``), which the rollout worker decides on.

A batch costs at most four INSERT IGNORE statements per rollout (one per arm × outcome: the
duplicates each skips are counted out by its row count, so a call id sent twice counts
once) and one tally upsert per rollout, all in one transaction: the tally never counts an
outcome that was not stored, nor misses one that was. Stripes (``TALLY_STRIPES``) keep
concurrent batches of one rollout from waiting on one row; a look sums them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import cast

from sqlalchemy import delete, func, insert, select
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.engine import Connection

from gate.states import ROLLOUT_TERMINAL, RolloutStatus

from .dialect import db_now
from .schema import prompt_rollout, rollout_feedback, rollout_tally

TALLY_STRIPES = 16


def record_feedback(
    conn: Connection, rollout_id: int, events: Sequence[tuple[str, bool, bool]], stripe: int
) -> tuple[int, int]:
    """Store ``events`` — (call id, canary?, correct?) — of one rollout and add those new to
    its tally (stripe ``stripe``). Returns (recorded, duplicates)."""
    groups: dict[tuple[int, int], list[str]] = {}
    for call_id, on_canary, was_correct in events:
        groups.setdefault((int(bool(on_canary)), int(bool(was_correct))), []).append(call_id)
    added: dict[int, list[int]] = {}  # canary → [n, correct]
    for (canary, correct), ids in sorted(groups.items()):
        row = {"rollout_id": rollout_id, "canary": canary, "correct": correct, "received_at": db_now()}
        stored = conn.execute(
            insert(rollout_feedback)
            .values([{**row, "call_id": i} for i in ids])
            .prefix_with("IGNORE", dialect="mysql")
            .prefix_with("OR IGNORE", dialect="sqlite")
        ).rowcount
        counts = added.setdefault(canary, [0, 0])
        counts[0] += stored
        counts[1] += stored * correct
    rows = [
        {"rollout_id": rollout_id, "stripe": stripe % TALLY_STRIPES, "canary": c, "n": n, "correct": k}
        for c, (n, k) in sorted(added.items())
        if n
    ]
    if rows:
        conn.execute(_tally_upsert(conn.dialect.name, rows))
    recorded = sum(n for n, _ in added.values())
    return recorded, len(events) - recorded


def _tally_upsert(dialect: str, rows: list[dict]):
    t = rollout_tally
    if dialect == "mysql":
        mysql_upsert = mysql.insert(t).values(rows)
        return mysql_upsert.on_duplicate_key_update(
            n=t.c.n + mysql_upsert.inserted.n, correct=t.c.correct + mysql_upsert.inserted.correct
        )
    sqlite_upsert = sqlite.insert(t).values(rows)
    return sqlite_upsert.on_conflict_do_update(
        index_elements=["rollout_id", "stripe", "canary"],
        set_={"n": t.c.n + sqlite_upsert.excluded.n, "correct": t.c.correct + sqlite_upsert.excluded.correct},
    )


def read_tally(conn: Connection, rollout_id: int) -> dict[str, tuple[int, int]]:
    """The rollout's outcomes so far, stripes summed: {"canary": (n, correct), "stable": …}."""
    t = rollout_tally
    found = {"canary": (0, 0), "stable": (0, 0)}
    sums = conn.execute(
        select(t.c.canary, func.sum(t.c.n), func.sum(t.c.correct))
        .where(t.c.rollout_id == rollout_id)
        .group_by(t.c.canary)
    )
    # the columns' types; a SUM is a Decimal on MySQL
    for canary, n, correct in cast("Iterable[tuple[int, int | Decimal | None, int | Decimal | None]]", sums):
        found["canary" if canary else "stable"] = (int(n or 0), int(correct or 0))
    return found


def count_feedback(conn: Connection, rollout_id: int) -> int:
    """The stored outcomes of a rollout, counted row by row (the tests check the tally
    against it)."""
    return int(conn.execute(select(func.count()).where(rollout_feedback.c.rollout_id == rollout_id)).scalar() or 0)


def prunable_feedback(conn: Connection, older_than: float) -> list[int]:
    """Rollouts decided more than ``older_than`` seconds ago that still have outcomes stored
    (their tally and figures stay)."""
    r = prompt_rollout
    ids: Iterable[int] = conn.execute(
        select(r.c.id).where(
            r.c.status.in_([str(s) for s in ROLLOUT_TERMINAL]),
            r.c.decided_at < db_now(-float(older_than)),
            select(rollout_feedback.c.rollout_id).where(rollout_feedback.c.rollout_id == r.c.id).exists(),
        )
    ).scalars()
    return [int(i) for i in ids]


def delete_feedback(conn: Connection, rollout_id: int, limit: int) -> int:
    """Delete up to ``limit`` stored outcomes of a decided rollout (never of one in CANARY)."""
    f = rollout_feedback
    ids: Sequence[str] = (
        conn.execute(
            select(f.c.call_id)
            .where(
                f.c.rollout_id == rollout_id,
                select(prompt_rollout.c.id)
                .where(prompt_rollout.c.id == rollout_id, prompt_rollout.c.status != RolloutStatus.CANARY)
                .exists(),
            )
            .limit(limit)
        )
        .scalars()
        .all()
    )
    if not ids:
        return 0
    return conn.execute(delete(f).where(f.c.rollout_id == rollout_id, f.c.call_id.in_(ids))).rowcount
