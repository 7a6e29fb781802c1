"""What a run's items add up to (``prompt_run_item``, read, never written): the counts and
the GROUP BY finalize derives metrics from, the failing and flipped samples reports show,
the run's model calls (latency, tokens) and retries, and its items paired with the
baseline's."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

from sqlalchemy import case, func, select
from sqlalchemy.engine import Connection

from gate.errors import CallFailure
from gate.records import FlipSample, ItemSample, RunCounts
from gate.states import Verdict
from gate.verdict.stats import nearest_rank

from .items import EXHAUSTED
from .schema import prompt_run_item

LABEL_CHARS = 128  # a label's length at most (gate.prompt.call_settings)


def run_breakdown(conn: Connection, run_id: int) -> list[tuple[str, str, str | None, int]]:
    """(verdict, expected, actual, count): the one GROUP BY finalize derives a label
    decision's metrics from. Labels are at most 128 characters: grouping by that prefix of
    the text columns keeps MariaDB's temporary table in memory (1,000,000 items: 0.6 s,
    against 1.8 s grouping the columns themselves)."""
    i = prompt_run_item
    expected, actual = (func.substr(c, 1, LABEL_CHARS) for c in (i.c.expected_decision, i.c.actual_decision))
    rows = conn.execute(
        select(i.c.verdict, expected, actual, func.count())
        .where(i.c.run_id == run_id)
        .group_by(i.c.verdict, expected, actual)
    )
    return cast("list[tuple[str, str, str | None, int]]", [tuple(r) for r in rows])  # the columns' types


def run_counts(conn: Connection, run_ids: Sequence[int]) -> dict[int, RunCounts]:
    if not run_ids:
        return {}
    i = prompt_run_item
    counts: dict[int, dict[str, int]] = {rid: {} for rid in run_ids}
    rows = conn.execute(
        select(i.c.run_id, i.c.verdict, func.count())
        .where(i.c.run_id.in_(list(run_ids)))
        .group_by(i.c.run_id, i.c.verdict)
    )
    for run_id, verdict, n in cast("Iterable[tuple[int, str, int]]", rows):  # the columns' types
        counts[run_id][verdict] = n
    return {
        rid: RunCounts(
            total=sum(c.values()),
            pending=c.get(Verdict.PENDING, 0),
            match=c.get(Verdict.MATCH, 0),
            mismatch=c.get(Verdict.MISMATCH, 0),
            error=c.get(Verdict.ERROR, 0),
            stopped=c.get(Verdict.STOPPED, 0),
        )
        for rid, c in counts.items()
    }


def failing_items(conn: Connection, run_id: int, limit: int, errors_only: bool = False) -> list[ItemSample]:
    """The run's first ``limit`` MISMATCH and ERROR items (ERROR only with ``errors_only``)."""
    i = prompt_run_item
    verdicts = [Verdict.ERROR] if errors_only else [Verdict.MISMATCH, Verdict.ERROR]
    rows = conn.execute(
        select(
            i.c.item_id,
            i.c.expected_decision,
            i.c.actual_decision,
            i.c.verdict,
            i.c.raw_output,
            i.c.error,
            i.c.judge,
        )
        .where(i.c.run_id == run_id, i.c.verdict.in_(verdicts))
        .order_by(i.c.position)
        .limit(limit)
    )
    return [ItemSample(r[0], r[1], r[2], r[3], r[4], r[5], judge=_shown_judging(r[6])) for r in rows]


ERROR_KINDS = tuple(kind.value for kind in CallFailure)  # an item's error begins "<kind>: "


def _shown_judging(judge: dict | None) -> dict | None:
    """What a failing item's report shows of its judging: the judge's answers (and live's
    answer, compared); not its call counts."""
    if not judge:
        return None
    return {
        k: v
        for k, v in judge.items()
        if k in ("label", "said", "orders", "outcome", "live_answer", "trials", "checks_failed")
    }


def error_kinds(conn: Connection, run_id: int) -> dict[str, int]:
    """The run's ERROR items by kind (one GROUP BY): the ``CallFailure`` their error begins
    with (``template: ...``), ``exhausted`` (no result after every attempt), ``lost`` (its
    claims lost in a row: ``items.LOST``), ``internal``, or ``other``. What a run's reason
    may say of its errors: never an item's own words."""
    error = prompt_run_item.c.error
    kind = case(
        *((error.like(f"{k}:%"), k) for k in ERROR_KINDS),
        (error == EXHAUSTED, "exhausted"),
        (error.like("lost:%"), "lost"),
        (error.like("internal error:%"), "internal"),
        else_="other",
    ).label("kind")
    rows = conn.execute(
        select(kind, func.count())
        .where(prompt_run_item.c.run_id == run_id, prompt_run_item.c.verdict == Verdict.ERROR)
        .group_by(kind)
    )
    return {k: int(n) for k, n in cast("Iterable[tuple[str, int]]", rows)}  # the columns' types


def first_error_of(conn: Connection, run_id: int, kind: str) -> str | None:
    """The error of the run's first ERROR item of ``kind`` (as ``error_kinds`` reads it)."""
    i = prompt_run_item
    return conn.execute(
        select(i.c.error)
        .where(i.c.run_id == run_id, i.c.verdict == Verdict.ERROR, i.c.error.like(f"{kind}:%"))
        .order_by(i.c.position)
        .limit(1)
    ).scalar()


def flip_counts(conn: Connection, run_id: int, baseline_run_id: int) -> dict[str, int]:
    """The run's items paired by position with the baseline's (same dataset version):
    fixed (baseline wrong, run right), broken (baseline right, run wrong), both right,
    both wrong. Only items both scored count (an ERROR item pairs with nothing)."""
    cand, live = prompt_run_item.alias("cand"), prompt_run_item.alias("live")
    right_now, right_before = cand.c.verdict == Verdict.MATCH, live.c.verdict == Verdict.MATCH
    scored = [Verdict.MATCH, Verdict.MISMATCH]

    def count(condition):
        return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)

    row = conn.execute(
        select(
            count(right_now & ~right_before),
            count(~right_now & right_before),
            count(right_now & right_before),
            count(~right_now & ~right_before),
        )
        .select_from(cand.join(live, (live.c.run_id == baseline_run_id) & (live.c.position == cand.c.position)))
        .where(cand.c.run_id == run_id, cand.c.verdict.in_(scored), live.c.verdict.in_(scored))
    ).first()
    assert row is not None  # sums without GROUP BY: always one row
    fixed, broken, both_right, both_wrong = (int(v) for v in row)
    return {
        "fixed": fixed,
        "broken": broken,
        "both_right": both_right,
        "both_wrong": both_wrong,
        "paired": fixed + broken + both_right + both_wrong,
    }


def flipped_items(
    conn: Connection, run_id: int, baseline_run_id: int, limit: int, broken: bool = True
) -> list[FlipSample]:
    """The first ``limit`` items (by position) the run broke (baseline right, run wrong),
    or with ``broken`` False fixed."""
    cand, live = prompt_run_item.alias("cand"), prompt_run_item.alias("live")
    now, before = (Verdict.MISMATCH, Verdict.MATCH) if broken else (Verdict.MATCH, Verdict.MISMATCH)
    rows = conn.execute(
        select(
            cand.c.item_id,
            cand.c.expected_decision,
            live.c.actual_decision,
            cand.c.actual_decision,
            cand.c.raw_output,
            live.c.raw_output,
            cand.c.judge,
        )
        .select_from(cand.join(live, (live.c.run_id == baseline_run_id) & (live.c.position == cand.c.position)))
        .where(cand.c.run_id == run_id, cand.c.verdict == now, live.c.verdict == before)
        .order_by(cand.c.position)
        .limit(limit)
    )
    return [
        FlipSample(
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            live_output=r[5],
            judge=_shown_judging(r[6]),
            checks_failed=_checks_failed(r[6]),
        )
        for r in rows
    ]


def _checks_failed(judge: Any) -> list[str] | None:
    """The checks an item failed (a decision with checks keeps them with its judging)."""
    found = judge.get("checks_failed") if isinstance(judge, dict) else None
    return [str(n) for n in found] if isinstance(found, list) else None


def call_stats(conn: Connection, run_id: int) -> dict[str, Any]:
    """The run's model calls as the report shows them: latency p50/p95/max (ms, nearest
    rank, read in the database: two ordered single-row reads, not every value), token
    sums, answers reused (their latency and tokens are those of the call that paid for
    them) and answered items with no token count (``unmetered``: no cost can be had)."""
    i = prompt_run_item
    answered = [i.c.run_id == run_id, i.c.verdict.in_([Verdict.MATCH, Verdict.MISMATCH])]
    row = conn.execute(
        select(
            func.count(i.c.latency_ms),
            func.max(i.c.latency_ms),
            func.coalesce(func.sum(i.c.prompt_tokens), 0),
            func.coalesce(func.sum(i.c.completion_tokens), 0),
            func.coalesce(func.sum(case((i.c.reused_update_id.is_not(None), 1), else_=0)), 0),
            func.coalesce(
                func.sum(case(((i.c.prompt_tokens.is_(None)) | (i.c.completion_tokens.is_(None)), 1), else_=0)), 0
            ),
        ).where(*answered)
    ).first()
    assert row is not None  # aggregates without GROUP BY: always one row
    timed = int(row[0])

    def at_percentile(q: int) -> int | None:
        if not timed:
            return None
        return conn.execute(
            select(i.c.latency_ms)
            .where(*answered, i.c.latency_ms.is_not(None))
            .order_by(i.c.latency_ms)
            .offset(nearest_rank(q, timed) - 1)
            .limit(1)
        ).scalar()

    return {
        "latency_ms": {"p50": at_percentile(50), "p95": at_percentile(95), "max": row[1], "timed": timed},
        "prompt_tokens": int(row[2]),
        "completion_tokens": int(row[3]),
        "reused": int(row[4]),
        "unmetered": int(row[5]),
    }


def item_attempt_stats(conn: Connection, run_ids: Sequence[int]) -> dict[str, int]:
    """Calls beyond the first per item (retries and re-claims), for status and reports."""
    if not run_ids:
        return {"retried_items": 0, "extra_attempts": 0, "max_attempt": 0}
    i = prompt_run_item
    retried = func.coalesce(func.sum(case((i.c.attempt > 1, 1), else_=0)), 0)
    extra = func.coalesce(func.sum(case((i.c.attempt > 1, i.c.attempt - 1), else_=0)), 0)
    row = conn.execute(
        select(retried, extra, func.coalesce(func.max(i.c.attempt), 0)).where(i.c.run_id.in_(list(run_ids)))
    ).first()
    assert row is not None  # aggregates without GROUP BY: always one row
    return {"retried_items": int(row[0]), "extra_attempts": int(row[1]), "max_attempt": int(row[2])}
