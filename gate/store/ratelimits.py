"""Rate limits: token buckets shared by every worker, and the per-run counts of
calls that waited for them.

One ``rate_limit_bucket`` row per limit (``gate.ratelimit`` names them). ``take_rate_tokens``
refills the bucket from the time elapsed since ``updated_at`` and spends ``cost`` in ONE
conditional UPDATE: the "not paused" and "enough tokens" checks sit in its WHERE clause,
so the affected-row count (rows *matched* on MySQL) says granted or not. No read first:
concurrent workers serialize on the row lock (MySQL) or the write lock (SQLite), and each
sees the row as the previous one left it. Elapsed time comes from the database's clock,
which every worker on every machine shares. Assignment order matters on MySQL (a SET
sees the columns assigned before it), hence ``ordered_values`` with ``tokens`` first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Float, Integer, func, insert, literal, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gate.errors import NotFound

from .dialect import db_now, floor_div, greatest, least, seconds_since
from .schema import EPOCH, rate_limit_bucket, rate_limit_usage


@dataclass(frozen=True)
class RateBucketState:
    """A bucket as of now: tokens after refill, its size and rate, how long it stays paused."""

    name: str
    tokens: float
    capacity: float
    refill_per_second: float
    paused_for: float
    granted: int
    rate_limited: int

    def wait_for(self, cost: float) -> float:
        """Seconds until ``cost`` tokens could be there (inf when the bucket never refills)."""
        if self.tokens >= cost:
            return self.paused_for
        if self.refill_per_second <= 0:
            return float("inf")
        return self.paused_for + (cost - self.tokens) / self.refill_per_second  # refill restarts after a pause


def _available_tokens():
    """The bucket's tokens as of now: refilled for the elapsed time, up to capacity."""
    b = rate_limit_bucket
    elapsed = greatest(seconds_since(b.c.updated_at), literal(0.0, Float()))
    return least(b.c.capacity, b.c.tokens + elapsed * b.c.refill_per_second)


def ensure_rate_bucket(conn: Connection, name: str, capacity: float, refill_per_second: float) -> bool:
    """Create the bucket (full), or bring an existing one to the configured size and rate.
    Returns True when created."""
    b = rate_limit_bucket
    capacity, refill_per_second = float(capacity), float(refill_per_second)
    found = conn.execute(
        update(b)
        .where(b.c.name == name)
        .values(
            capacity=capacity, refill_per_second=refill_per_second, tokens=least(b.c.tokens, literal(capacity, Float()))
        )
    ).rowcount
    if found == 1:
        return False
    try:
        with conn.begin_nested():
            conn.execute(
                insert(b).values(
                    name=name,
                    capacity=capacity,
                    refill_per_second=refill_per_second,
                    tokens=capacity,
                    updated_at=db_now(),
                    paused_until=EPOCH,
                    granted=0,
                    rate_limited=0,
                    last_grant=0,
                    created_at=db_now(),
                )
            )
        return True
    except IntegrityError:
        return False  # another worker created it a moment ago


def take_rate_tokens(conn: Connection, name: str, cost: float, up_to: int = 1) -> int:
    """Refill and spend in one conditional UPDATE: as many calls of ``cost`` tokens as the
    bucket holds, at most ``up_to``, and only when it holds at least one call's worth.
    Returns the calls granted (0 = refused). Every SET expression reads the row as it was
    (on MySQL they come before the columns they read are assigned); with ``up_to`` > 1 the
    count granted is read back from the row this transaction holds locked."""
    b = rate_limit_bucket
    cost, up_to = float(cost), max(1, int(up_to))
    available = _available_tokens()
    calls = least(floor_div(available, cost), literal(up_to, Integer())) if up_to > 1 else literal(1, Integer())
    matched = conn.execute(
        update(b)
        .where(b.c.name == name, b.c.paused_until <= db_now(), available >= cost)
        .ordered_values(
            (b.c.last_grant, calls),
            (b.c.granted, b.c.granted + calls),
            (b.c.tokens, available - calls * cost),
            (b.c.updated_at, greatest(b.c.updated_at, db_now())),
        )
    ).rowcount
    if matched != 1:
        return 0
    if up_to == 1:
        return 1
    granted = conn.execute(select(b.c.last_grant).where(b.c.name == name)).scalar()
    assert granted is not None  # the row this transaction just updated
    return int(granted)


def rate_bucket_state(conn: Connection, name: str) -> RateBucketState | None:
    """The bucket as of now (for how long to sleep after a refusal; never to decide a grant)."""
    b = rate_limit_bucket
    row = conn.execute(
        select(
            _available_tokens(),
            b.c.capacity,
            b.c.refill_per_second,
            seconds_since(b.c.paused_until),
            b.c.granted,
            b.c.rate_limited,
        ).where(b.c.name == name)
    ).first()
    if row is None:
        return None
    return RateBucketState(
        name=name,
        tokens=float(row[0]),
        capacity=float(row[1]),
        refill_per_second=float(row[2]),
        paused_for=max(0.0, -float(row[3])),
        granted=int(row[4]),
        rate_limited=int(row[5]),
    )


def pause_rate_bucket(conn: Connection, name: str, seconds: float) -> bool:
    """A provider's 429: no grants for ``seconds`` (a longer pause already set stays), the
    bucket emptied so that it refills from the end of the pause, not in one burst."""
    b = rate_limit_bucket
    until = db_now(float(seconds))
    return (
        conn.execute(
            update(b)
            .where(b.c.name == name)
            .ordered_values(
                (b.c.paused_until, greatest(b.c.paused_until, until)),
                (b.c.tokens, literal(0.0, Float())),
                (b.c.updated_at, greatest(b.c.updated_at, until)),
                (b.c.rate_limited, b.c.rate_limited + 1),
            )
        ).rowcount
        == 1
    )


def rate_buckets(conn: Connection) -> list[RateBucketState]:
    names: Sequence[str] = (
        conn.execute(select(rate_limit_bucket.c.name).order_by(rate_limit_bucket.c.name)).scalars().all()
    )
    return [s for s in (rate_bucket_state(conn, n) for n in names) if s is not None]


def add_rate_limit_usage(
    conn: Connection, run_id: int, *, throttled: int = 0, throttled_ms: int = 0, rate_limited: int = 0
) -> None:
    """Add an executor's counts for one run: calls that waited for the budget, the wait,
    and 429s from the provider."""
    u = rate_limit_usage
    bump = (
        update(u)
        .where(u.c.run_id == run_id)
        .values(
            throttled=u.c.throttled + int(throttled),
            throttled_ms=u.c.throttled_ms + int(throttled_ms),
            rate_limited=u.c.rate_limited + int(rate_limited),
            updated_at=db_now(),
        )
    )
    if conn.execute(bump).rowcount == 1:
        return
    try:
        with conn.begin_nested():
            conn.execute(
                insert(u).values(
                    run_id=run_id,
                    throttled=int(throttled),
                    throttled_ms=int(throttled_ms),
                    rate_limited=int(rate_limited),
                    updated_at=db_now(),
                )
            )
        return
    except IntegrityError:
        pass  # inserted by another worker meanwhile: add to it
    if conn.execute(bump).rowcount != 1:
        raise NotFound(f"rate-limit usage row of run {run_id} vanished")


def rate_limit_stats(conn: Connection, run_ids: Sequence[int]) -> dict[str, int]:
    """For status and reports: calls that waited for the shared budget, the seconds they
    waited, and calls the provider answered with 429."""
    if not run_ids:
        return {"throttled_calls": 0, "throttle_wait_seconds": 0, "rate_limited_calls": 0}
    u = rate_limit_usage
    row = conn.execute(
        select(
            func.coalesce(func.sum(u.c.throttled), 0),
            func.coalesce(func.sum(u.c.throttled_ms), 0),
            func.coalesce(func.sum(u.c.rate_limited), 0),
        ).where(u.c.run_id.in_(list(run_ids)))
    ).first()
    assert row is not None  # sums without GROUP BY: always one row
    return {
        "throttled_calls": int(row[0]),
        "throttle_wait_seconds": round(int(row[1]) / 1000),
        "rate_limited_calls": int(row[2]),
    }
