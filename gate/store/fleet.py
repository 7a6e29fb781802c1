"""The fleet at a glance, for the status page and /metrics: updates and runs by status,
the items of open runs by state, the oldest submission still waiting, the workers and
their oldest heartbeat, the model calls never made, by why, and those made: recorded, and
at most how many more lost with workers that died (counters). A handful of
grouped reads on indexed columns; items are counted only for open runs (the finished ones
carry their counts in their metrics)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from sqlalchemy import and_, case, func, select
from sqlalchemy.engine import Connection

from gate.records import FleetCounts
from gate.states import RUN_OPEN, UpdateStatus, Verdict

from .dialect import db_now, seconds_since
from .schema import prompt_run, prompt_run_item, prompt_update, worker
from .spend import read_counters


def fleet_counts(conn: Connection, stale_seconds: float) -> FleetCounts:
    return FleetCounts(
        updates=_by_status(conn, prompt_update),
        runs=_by_status(conn, prompt_run),
        items=_open_items(conn),
        oldest_pending_seconds=_oldest_pending(conn),
        **_workers(conn, stale_seconds),
        calls_saved=_calls_saved(conn),
        calls=_calls(conn),
    )


SAVED_REASONS = ("early_stop", "reuse", "spend_cap")


def _calls_saved(conn: Connection) -> dict[str, int]:
    """Model calls never made, by why, over every finished run (counters finalize adds to:
    a read of three rows, not a sum over the runs)."""
    counts = read_counters(conn, [f"calls_saved_{reason}" for reason in SAVED_REASONS])
    return {reason: counts[f"calls_saved_{reason}"] for reason in SAVED_REASONS}


def _calls(conn: Connection) -> dict[str, int]:
    """Model calls of every finished run: recorded, and at most how many more may have been
    made and never recorded (claims lost with workers that died: ``stops.unrecorded_claims``);
    counters finalize adds to as each run ends."""
    counts = read_counters(conn, ["calls_recorded", "calls_unrecorded"])
    return {"recorded": counts["calls_recorded"], "unrecorded": counts["calls_unrecorded"]}


def _by_status(conn: Connection, table) -> dict[str, int]:
    return dict(conn.execute(select(table.c.status, func.count()).group_by(table.c.status)).all())


def _open_items(conn: Connection) -> dict[str, int]:
    """Items of open runs: ``leased`` (a worker holds them), ``pending`` (waiting for one),
    the scored ones by verdict (MATCH, MISMATCH, ERROR), and STOPPED (never called: their
    run stopped, and is about to be finalized)."""
    i, r = prompt_run_item, prompt_run
    leased = and_(i.c.verdict == Verdict.PENDING, i.c.lease_until > db_now())
    state = case((leased, "leased"), (i.c.verdict == Verdict.PENDING, "pending"), else_=i.c.verdict)
    rows = conn.execute(
        select(state.label("state"), func.count())
        .select_from(i.join(r, r.c.id == i.c.run_id))
        .where(r.c.status.in_(sorted(RUN_OPEN)))
        .group_by(state)
    )
    counts = {
        "pending": 0,
        "leased": 0,
        Verdict.MATCH.value: 0,
        Verdict.MISMATCH.value: 0,
        Verdict.ERROR.value: 0,
        Verdict.STOPPED.value: 0,
    }
    counts.update({str(s): n for s, n in cast("Iterable[tuple[str, int]]", rows)})  # the columns' types
    return counts


def _oldest_pending(conn: Connection) -> float | None:
    """Seconds since the oldest submission no worker has started on (None: none waits)."""
    u = prompt_update
    oldest = select(func.min(u.c.id)).where(u.c.status == UpdateStatus.PENDING).scalar_subquery()
    age = conn.execute(select(seconds_since(u.c.created_at)).where(u.c.id == oldest)).scalar()
    return None if age is None else max(0.0, float(age))


def _workers(conn: Connection, stale_seconds: float) -> dict:
    """Live workers (a heartbeat within ``stale_seconds``) and the age of the stalest beat."""
    w = worker
    row = conn.execute(
        select(func.count(), func.max(seconds_since(w.c.heartbeat_at))).where(w.c.heartbeat_at > db_now(-stale_seconds))
    ).one()
    count, oldest = cast("tuple[int, float | None]", row)  # the columns' types
    return {"workers": count, "oldest_heartbeat_seconds": None if oldest is None else max(0.0, float(oldest))}
