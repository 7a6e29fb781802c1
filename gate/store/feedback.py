"""Production's outcomes of a canary rollout's calls (``rollout_feedback``) and their running
counts (``rollout_tally``), which the rollout worker decides on.

A batch costs at most four INSERT IGNORE statements per rollout (one per arm × outcome: the
duplicates each skips are counted out by its row count, so a call id sent twice counts
once) and one tally upsert per rollout, all in one transaction: the tally never counts an
outcome that was not stored, nor misses one that was. Stripes (``TALLY_STRIPES``) keep
concurrent batches of one rollout from waiting on one row; a look sums them.

Outcomes sent through the service are also counted by sender (``rollout_source_tally``:
the token's name and the call id's process tag), and the tally a decision reads
(``read_tally``) caps each sender's share of an arm's outcomes: a process at most the
rollout's ``max_process_share`` of them, a token at most ``max_token_share`` (issue 48: a
process's own count of what it served cannot bound what it reports). Outcomes written on
the database itself (a runtime on the database, the tests) have no sender and are not
capped: whoever holds the database's credentials could write the tally directly."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import cast

from sqlalchemy import delete, func, insert, select
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.engine import Connection

from gate.states import ROLLOUT_TERMINAL, RolloutStatus

from .dialect import db_now
from .schema import gate_secret, prompt_rollout, rollout_feedback, rollout_source_tally, rollout_tally

TALLY_STRIPES = 16
CALL_SECRET = "call_keys"  # gate_secret's row the call keys derive from


def record_feedback(
    conn: Connection,
    rollout_id: int,
    events: Sequence[tuple],
    stripe: int,
    token: str | None = None,
) -> tuple[int, int]:
    """Store ``events`` — (call id, canary?, correct?[, process tag]) — of one rollout and add
    those new to its tally (stripe ``stripe``); with ``token`` (the service's sender) to its
    count by sender too. Returns (recorded, duplicates)."""
    groups: dict[tuple[str, int, int], list[str]] = {}
    for call_id, on_canary, was_correct, *process in events:
        key = (process[0] if process else "", int(bool(on_canary)), int(bool(was_correct)))
        groups.setdefault(key, []).append(call_id)
    added: dict[int, list[int]] = {}  # canary → [n, correct]
    by_source: dict[tuple[str, int], list[int]] = {}  # (process, canary) → [n, correct]
    for (process_tag, canary, correct), ids in sorted(groups.items()):
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
        mine = by_source.setdefault((process_tag, canary), [0, 0])
        mine[0] += stored
        mine[1] += stored * correct
    if token is not None:
        sources = [
            {"rollout_id": rollout_id, "token": token, "process": p, "canary": c, "n": n, "correct": k}
            for (p, c), (n, k) in sorted(by_source.items())
            if n
        ]
        if sources:
            conn.execute(_tally_upsert(conn.dialect.name, sources, rollout_source_tally))
    rows = [
        {"rollout_id": rollout_id, "stripe": stripe % TALLY_STRIPES, "canary": c, "n": n, "correct": k}
        for c, (n, k) in sorted(added.items())
        if n
    ]
    if rows:
        conn.execute(_tally_upsert(conn.dialect.name, rows))
    recorded = sum(n for n, _ in added.values())
    return recorded, len(events) - recorded


def _tally_upsert(dialect: str, rows: list[dict], t=rollout_tally):
    if dialect == "mysql":
        mysql_upsert = mysql.insert(t).values(rows)
        return mysql_upsert.on_duplicate_key_update(
            n=t.c.n + mysql_upsert.inserted.n, correct=t.c.correct + mysql_upsert.inserted.correct
        )
    sqlite_upsert = sqlite.insert(t).values(rows)
    return sqlite_upsert.on_conflict_do_update(
        index_elements=[c.name for c in t.primary_key.columns],
        set_={"n": t.c.n + sqlite_upsert.excluded.n, "correct": t.c.correct + sqlite_upsert.excluded.correct},
    )


def read_tally(conn: Connection, rollout_id: int) -> dict[str, tuple[int, int]]:
    """The rollout's outcomes a decision counts, stripes summed: {"canary": (n, correct),
    "stable": …}, each sender's share capped (the module docstring; ``_capped``)."""
    raw = read_raw_tally(conn, rollout_id)
    config = conn.execute(select(prompt_rollout.c.config).where(prompt_rollout.c.id == rollout_id)).scalar()
    config = config if isinstance(config, dict) else {}
    s = rollout_source_tally
    # the columns' types: token, process, canary flag, n, correct (a SUM-free read: plain ints)
    rows = cast(
        "list[tuple[str, str, int, int, int]]",
        conn.execute(
            select(s.c.token, s.c.process, s.c.canary, s.c.n, s.c.correct).where(s.c.rollout_id == rollout_id)
        ).all(),
    )
    if not rows:
        return raw
    shares = (float(config.get("max_process_share", 0.5)), float(config.get("max_token_share", 1.0)))
    found = {}
    for arm, flag in (("canary", 1), ("stable", 0)):
        senders = [(str(t), str(p), int(n), int(k)) for t, p, c, n, k in rows if int(c) == flag]
        found[arm] = _capped(raw[arm], senders, *shares)
    return found


def _capped(
    raw: tuple[int, int], senders: list[tuple[str, str, int, int]], process_share: float, token_share: float
) -> tuple[int, int]:
    """An arm's (n, correct) with each process's outcomes cut to at most ``process_share`` of
    the outcomes counted, then each token's to ``token_share`` (``senders``: token, process,
    n, correct; what ``raw`` holds beyond them has no sender and is counted whole). A cut
    keeps the sender's rate (its correct scaled down with its n). One sender alone counts
    nothing under a share below 1."""
    base = max(0, raw[0] - sum(n for *_, n, _k in senders))
    base_correct = max(0, raw[1] - sum(k for *_, k in senders))
    cut_processes = _cut([(n, k) for _t, _p, n, k in senders], process_share, base)
    per_token: dict[str, list[int]] = {}
    for (token, _p, _n, _k), (n, k) in zip(senders, cut_processes, strict=True):
        mine = per_token.setdefault(token, [0, 0])
        mine[0] += n
        mine[1] += k
    cut_tokens = _cut([(n, k) for n, k in per_token.values()], token_share, base)
    return base + sum(n for n, _ in cut_tokens), base_correct + sum(k for _, k in cut_tokens)


def _cut(counts: list[tuple[int, int]], share: float, base: int) -> list[tuple[int, int]]:
    """Each (n, correct) cut to at most ``share`` × T, T the largest total with
    ``base + Σ min(n, share·T) ≥ T`` (a concave function of T: the T that satisfy it are an
    interval from 0; bisected)."""
    if share >= 1 or not counts:
        return counts
    total = base + sum(n for n, _ in counts)
    low, high = 0.0, float(total)
    for _ in range(64):
        mid = (low + high) / 2
        if base + sum(min(n, share * mid) for n, _ in counts) >= mid:
            low = mid
        else:
            high = mid
    cap = int(share * low + 1e-9)
    return [(min(n, cap), k * min(n, cap) // n if n else 0) for n, k in counts]


def read_raw_tally(conn: Connection, rollout_id: int) -> dict[str, tuple[int, int]]:
    """The rollout's outcomes stored so far, stripes summed, no share capped."""
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


def call_secret(conn: Connection) -> bytes:
    """The secret the call keys derive from, written once by the first that needs it
    (INSERT IGNORE: concurrent first writers read back the one stored). Never printed."""
    import secrets

    g = gate_secret
    found = conn.execute(select(g.c.value).where(g.c.name == CALL_SECRET)).scalar()
    if found is None:
        conn.execute(
            insert(g)
            .values(name=CALL_SECRET, value=secrets.token_hex(32))
            .prefix_with("IGNORE", dialect="mysql")
            .prefix_with("OR IGNORE", dialect="sqlite")
        )
        found = conn.execute(select(g.c.value).where(g.c.name == CALL_SECRET)).scalar()
    return bytes.fromhex(str(found))


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
