"""The doorbell of an idle fleet, and the watcher's sense of an update about to end.

MySQL/MariaDB has no LISTEN/NOTIFY; what it has is the named user lock (``GET_LOCK``), whose
waiters the server wakes the moment its holder lets go. The bell is one such lock per gate
database (its name: a hash of the database's name, so two gates on one server never ring
each other). A long-lived ringer (``promptgate serve``) holds it; an idle worker process's
probe asks "any open update?" and, when there is none and a ringer holds the bell, waits
for the bell in the same statement, up to its probe interval (``probe_or_listen``). To
ring, the ringer releases the bell and takes it again: the waiting probes are granted it
in turn, each lets go at once (``release_and_probe``) and finds the new work.

What it costs: one statement per probe interval per idle process, as the plain probe did
(the statement waits instead of the process sleeping), on the connection the probe keeps
(one per worker process); one kept connection for the ringer; one statement more per
process woken. Nothing on SQLite (one machine: the probe alone)."""

from __future__ import annotations

from sqlalchemy import and_, case, exists, func, literal, not_, or_, select
from sqlalchemy.engine import Connection

from gate.states import RUN_OPEN, LiveRequestStatus, UpdateStatus, Verdict

from .schema import live_request, prompt_run, prompt_run_item, prompt_update

WORK, RUNG, QUIET, NO_RINGER = "work", "rung", "quiet", "no ringer"
NEAR_END_ITEMS = 64  # an update with fewer unanswered items than this in every open run ends soon


def has_bell(conn: Connection) -> bool:
    return conn.dialect.name in ("mysql", "mariadb")


def _bell_name():
    return func.concat("promptgate_bell_", func.md5(func.database()))  # 16 + 32 characters: under the 64 allowed


def _open_work():
    """The idle probe's question (``updates.any_open_update``): an open update or a live
    request waiting for the reconcile step."""
    open_update = exists().where(prompt_update.c.status.in_([UpdateStatus.PENDING, UpdateStatus.RUNNING]))
    waiting = exists().where(live_request.c.status == LiveRequestStatus.PENDING)
    return or_(open_update, waiting)


def probe_or_listen(conn: Connection, wait_seconds: float) -> str:
    """One statement: WORK when work is open; else NO_RINGER when nobody holds the bell
    (the caller sleeps as before); else it waits up to ``wait_seconds`` for the bell: RUNG
    (granted: the caller holds it and must ``release_and_probe`` at once) or QUIET."""
    name = _bell_name()
    found = conn.execute(
        select(
            case(
                (_open_work(), literal(2)),
                (func.is_used_lock(name).is_(None), literal(3)),
                else_=func.get_lock(name, round(max(0.0, wait_seconds), 3)),
            )
        )
    ).scalar()
    return {2: WORK, 3: NO_RINGER, 1: RUNG}.get(int(found), QUIET) if found is not None else QUIET


def release_and_probe(conn: Connection) -> bool:
    """A rung probe lets the bell go (the next waiter's turn, then the ringer's) and asks
    again: is work open?"""
    found = conn.execute(select(func.release_lock(_bell_name()).label("released"), _open_work().label("open"))).first()
    return found is not None and bool(found.open)


def take_bell(conn: Connection, wait_seconds: float) -> bool:
    """The ringer takes the bell (waiting up to ``wait_seconds``): True once it holds it."""
    return conn.execute(select(func.get_lock(_bell_name(), wait_seconds))).scalar() == 1


def let_go_of_bell(conn: Connection) -> bool:
    """The ringer lets go: True when it held the bell (its waiters are woken in turn)."""
    return conn.execute(select(func.release_lock(_bell_name()))).scalar() == 1


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
