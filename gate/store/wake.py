"""The knock that wakes an idle fleet, and the watcher's sense of an update about to end.

MySQL/MariaDB has no LISTEN/NOTIFY, and a lock per waiter (``GET_LOCK``) would cost a
connection each. What every session may do is interrupt a statement of its own user's
sessions (``KILL QUERY``). An idle worker process's probe asks "any open update?" and, when
there is none, waits out its interval in the same statement (``SLEEP``), on the one
connection the probe keeps; the statement carries a tag. Whoever opens work (a submission,
on the database or through the service) knocks after its commit: it lists the sessions of
this database whose statement carries the tag and interrupts those statements, and each
woken probe asks again at once and finds the work.

What it costs: one statement per probe interval per idle process, as a probe that slept in
the process did; the knocker one read of the process list and one ``KILL QUERY`` per idle
process. A knock that lands as a probe ends only interrupts the next probe (which asks
again); a knock the server refuses (another database user without the right to interrupt
the workers' statements) leaves the fleet to its next probe. Nothing on SQLite (one
machine: the probe alone)."""

from __future__ import annotations

import logging

from sqlalchemy import and_, case, column, exists, func, literal, literal_column, not_, or_, select, table
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, OperationalError

from gate.db import error_code
from gate.states import RUN_OPEN, LiveRequestStatus, UpdateStatus, Verdict

from .schema import live_request, prompt_run, prompt_run_item, prompt_update

log = logging.getLogger("promptgate.wake")
WORK, KNOCKED, QUIET = "work", "knocked", "quiet"
NEAR_END_ITEMS = 64  # an update with fewer unanswered items than this in every open run ends soon
INTERRUPTED = 1317  # MySQL/MariaDB: "Query execution was interrupted" (KILL QUERY)
# The idle probe's tag, in two halves: the knock's own statement holds them apart, so it never
# finds itself (or another knock) in the process list. A knock interrupts a statement only when
# it begins as the probe does and ends with the tag: PyMySQL sends values inside the statement's
# text, so a write of a model's answer or a dataset's row holding the tag's words carries them
# too, and must not be interrupted (the probe itself carries no value from outside).
TAG_HEAD, TAG_TAIL = "promptgate idle", " probe"
PROBE_BEGINS = "SELECT CASE WHEN ("
_processlist = table("PROCESSLIST", column("ID"), column("DB"), column("INFO"), schema="information_schema")


def can_knock(bind) -> bool:
    return bind.dialect.name in ("mysql", "mariadb")


def _open_work():
    """The idle probe's question (``updates.any_open_update``): an open update or a live
    request waiting for the reconcile step."""
    open_update = exists().where(prompt_update.c.status.in_([UpdateStatus.PENDING, UpdateStatus.RUNNING]))
    waiting = exists().where(live_request.c.status == LiveRequestStatus.PENDING)
    return or_(open_update, waiting)


def probe_or_wait(conn: Connection, wait_seconds: float) -> str:
    """One statement: WORK when work is open; else it waits ``wait_seconds`` for a knock:
    KNOCKED (interrupted: the caller asks again at once) or QUIET (the wait ran out)."""
    probe = select(
        case((_open_work(), literal(1)), else_=func.sleep(round(max(0.0, wait_seconds), 3)) * 0),
        literal_column(f"'{TAG_HEAD}{TAG_TAIL}'"),
    )
    try:
        found = conn.execute(probe).scalar()
    except OperationalError as exc:
        if error_code(exc.orig) == INTERRUPTED:
            return KNOCKED
        raise
    return WORK if found == 1 else QUIET


def session_of(conn: Connection) -> int:
    """The server's id of ``conn``'s session: what a process asked to stop interrupts
    (``interrupt``), so that its own waiting probe ends now, not at its interval's end."""
    return int(conn.execute(select(func.connection_id())).scalar_one())


def interrupt(conn: Connection, session: int) -> bool:
    """Interrupt the statement session ``session`` runs (a probe of this process's: the one
    connection the probe keeps runs nothing else). False when the server refused."""
    try:
        conn.exec_driver_sql(f"KILL QUERY {int(session)}")
        return True
    except DBAPIError as exc:
        log.debug("interrupting session %s refused: %s", session, exc.orig)
        return False


def knock(conn: Connection) -> int:
    """After a commit that opened work: interrupt every idle probe of this database's fleet
    (their sessions' statements that begin as the probe does and end with its tag). Returns
    how many were knocked; a knock the server refuses is skipped (that process sees the work
    at its next probe)."""
    waiting: list[int] = list(
        conn.execute(
            select(_processlist.c.ID).where(
                _processlist.c.DB == func.database(),
                _processlist.c.ID != func.connection_id(),
                _processlist.c.INFO.like(func.concat(PROBE_BEGINS, "%'", TAG_HEAD, TAG_TAIL, "'")),
            )
        ).scalars()
    )
    return sum(interrupt(conn, session) for session in waiting)


def updates_near_end(conn: Connection, update_ids: list[int]) -> set[int]:
    """Of these RUNNING updates, those whose every open run is materialized and has fewer
    than ``NEAR_END_ITEMS`` items unanswered: their end is a wave of calls away. Each run
    costs one index range of at most ``NEAR_END_ITEMS`` entries (ix_item_ready)."""
    if not update_ids:
        return set()
    nth_unanswered = (
        select(prompt_run_item.c.position)
        .where(prompt_run_item.c.run_id == prompt_run.c.id, prompt_run_item.c.verdict == Verdict.PENDING)
        .limit(1)
        .offset(NEAR_END_ITEMS - 1)
        .scalar_subquery()
    )
    far_run = exists().where(
        prompt_run.c.update_id == prompt_update.c.id,
        prompt_run.c.status.in_(list(RUN_OPEN)),
        or_(prompt_run.c.materialized_at.is_(None), nth_unanswered.is_not(None)),
    )
    rows = conn.execute(
        select(prompt_update.c.id).where(
            and_(prompt_update.c.id.in_(sorted(set(update_ids))), prompt_update.c.status == UpdateStatus.RUNNING),
            not_(far_run),
        )
    )
    return {r.id for r in rows}
