"""Worker processes (``worker``): registered at start, a heartbeat every few seconds,
pruned when silent."""

from __future__ import annotations

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from gate.records import WorkerRow

from .dialect import db_now
from .schema import worker


def register_worker(conn: Connection, worker_id: str, role: str, host: str, pid: int) -> None:
    conn.execute(
        insert(worker).values(id=worker_id, role=role, host=host, pid=pid, started_at=db_now(), heartbeat_at=db_now())
    )


def heartbeat_worker(conn: Connection, worker_id: str, oldest_call_seconds: float | None = None) -> bool:
    """The heartbeat, with the age of the process's oldest model call in flight (None: none)."""
    return (
        conn.execute(
            update(worker)
            .where(worker.c.id == worker_id)
            .values(heartbeat_at=db_now(), oldest_call_seconds=oldest_call_seconds)
        ).rowcount
        == 1
    )


def remove_worker(conn: Connection, worker_id: str) -> None:
    conn.execute(delete(worker).where(worker.c.id == worker_id))


def live_workers(conn: Connection, stale_seconds: float) -> list[WorkerRow]:
    rows = conn.execute(
        select(worker)
        .where(worker.c.heartbeat_at > db_now(-stale_seconds))
        .order_by(worker.c.role, worker.c.started_at)
    )
    return [WorkerRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows]  # the table's columns, in order


def prune_workers(conn: Connection, stale_seconds: float) -> int:
    return conn.execute(delete(worker).where(worker.c.heartbeat_at <= db_now(-stale_seconds))).rowcount


def any_live_worker_of(conn: Connection, role: str, stale_seconds: float) -> bool:
    """Is a process running ``role`` alive (a heartbeat within ``stale_seconds``)? Its row's
    role is 'all' or the roles it runs, comma-separated."""
    found = conn.execute(
        select(worker.c.id)
        .where(
            worker.c.heartbeat_at > db_now(-stale_seconds),
            (worker.c.role == "all") | (("," + worker.c.role + ",").contains(f",{role},")),
        )
        .limit(1)
    ).first()
    return found is not None
