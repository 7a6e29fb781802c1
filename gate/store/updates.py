"""Updates (``prompt_update``): a submitted candidate config and its state machine, from
PENDING through RUNNING to a terminal state; and the reconciler's choice of the updates
whose runs have all ended."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import exists, insert, select, update
from sqlalchemy.engine import Connection

from gate.errors import IllegalTransition, NotFound
from gate.records import Update
from gate.states import RUN_OPEN, UPDATE_OPEN, LiveRequestStatus, RunStatus, UpdateStatus, update_sources
from gate.verdict.reasons import without_legacy_items

from .dialect import db_now
from .schema import live_request, prompt_run, prompt_update


def _update(row) -> Update:
    return Update(
        row.id,
        row.prompt_name,
        row.mode,
        row.status,
        row.candidate_config,
        row.candidate_hash,
        row.base_version,
        row.source or {},
        without_legacy_items(row.reason),  # one written before reasons named no item: cut
        row.created_at,
        row.started_at,
        row.finished_at,
        bool(row.full_run),
        row.limits,
        row.stopped,
    )


def insert_update(
    conn: Connection,
    *,
    prompt_name: str,
    mode: str,
    config: dict,
    config_hash: str,
    base_version: int,
    source: dict,
    source_key: str,
    source_sha: str | None,
    provider: dict | None = None,
    reuse: bool = True,
    submitted_by: str | None = None,
    full: bool = False,
    limits: dict | None = None,
) -> int:
    """A new PENDING update; ``provider`` is the declaration its calls go to (None: the
    default provider); ``reuse``: whether answers already paid for may stand in for calls;
    ``submitted_by``: the service token's name (None: the CLI on the database); ``full``:
    no run of it stops early; ``limits``: its spend caps and the upper bound of its calls
    (gate.calls.spend_caps), pinned."""
    result = conn.execute(
        insert(prompt_update).values(
            prompt_name=prompt_name,
            mode=mode,
            status=UpdateStatus.PENDING,
            candidate_config=config,
            candidate_hash=config_hash,
            base_version=base_version,
            source=source,
            source_key=source_key,
            source_sha=source_sha,
            provider=provider,
            reuse=1 if reuse else 0,
            submitted_by=submitted_by,
            full_run=1 if full else 0,
            limits=limits,
            created_at=db_now(),
        )
    )
    key = result.inserted_primary_key
    assert key is not None  # an INSERT of one row
    return key[0]


def set_update_limits(conn: Connection, update_id: int, limits: dict) -> int:
    """Pin the update's spend caps and the upper bound of its calls (at submit, once its
    runs are staged, in the same transaction)."""
    return conn.execute(update(prompt_update).where(prompt_update.c.id == update_id).values(limits=limits)).rowcount


def find_update(conn: Connection, update_id: int) -> Update | None:
    row = conn.execute(select(prompt_update).where(prompt_update.c.id == update_id)).first()
    return _update(row) if row else None


def update_status(conn: Connection, update_id: int) -> str:
    """The status of one update: a primary-key read, what a waiting caller polls."""
    status = conn.execute(select(prompt_update.c.status).where(prompt_update.c.id == update_id)).scalar()
    if status is None:
        raise NotFound(f"unknown update {update_id}")
    return status


def get_update(conn: Connection, update_id: int) -> Update:
    found = find_update(conn, update_id)
    if found is None:
        raise NotFound(f"unknown update {update_id}")
    return found


def superseded_updates(
    conn: Connection, prompt_name: str, mode: str, source_key: str | None, submitted_by: str | None = None
) -> list[int]:
    """Open updates that a new submission replaces (latest wins): every open apply-mode
    update of the prompt (``source_key`` None), or the open check-mode updates of the same
    source of the same submitter (``submitted_by``: a token's name; None: the CLI on the
    database), so no token replaces another's."""
    u = prompt_update
    stmt = select(u.c.id).where(u.c.prompt_name == prompt_name, u.c.mode == mode, u.c.status.in_(list(UPDATE_OPEN)))
    if source_key is not None:
        stmt = stmt.where(
            u.c.source_key == source_key,
            u.c.submitted_by.is_(None) if submitted_by is None else u.c.submitted_by == submitted_by,
        )
    return list(conn.execute(stmt.order_by(prompt_update.c.id).with_for_update()).scalars())


def lock_update_owner(conn: Connection, update_id: int) -> str | None:
    """The name of the token that submitted the update (None: the CLI on the database),
    its row locked for the caller's transaction; NotFound when there is none."""
    row = conn.execute(
        select(prompt_update.c.submitted_by).where(prompt_update.c.id == update_id).with_for_update()
    ).first()
    if row is None:
        raise NotFound(f"unknown update {update_id}")
    return row.submitted_by


def transition_update(conn: Connection, update_id: int, to: UpdateStatus, reason: str | None = None) -> None:
    """One guarded UPDATE from the states the state machine allows; raises IllegalTransition
    (with the state found) when the update is not in one of them."""
    sources = update_sources(to)
    values: dict[str, Any] = {"status": to}
    if reason is not None:
        values["reason"] = reason
    if to == UpdateStatus.RUNNING:
        values["started_at"] = db_now()
    else:
        values["finished_at"] = db_now()
    moved = conn.execute(
        update(prompt_update)
        .where(prompt_update.c.id == update_id, prompt_update.c.status.in_(list(sources)))
        .values(**values)
    ).rowcount
    if moved != 1:
        now = conn.execute(select(prompt_update.c.status).where(prompt_update.c.id == update_id)).scalar()
        raise IllegalTransition(f"update {update_id} cannot move to {to}: it is {now or 'missing'}")


def start_update(conn: Connection, update_id: int) -> bool:
    """PENDING → RUNNING if still PENDING; True when the update is (now) RUNNING."""
    try:
        transition_update(conn, update_id, UpdateStatus.RUNNING)
        return True
    except IllegalTransition:
        status = conn.execute(select(prompt_update.c.status).where(prompt_update.c.id == update_id)).scalar()
        return status == UpdateStatus.RUNNING


def cancel_update(conn: Connection, update_id: int, reason: str) -> None:
    """Cancel an open update and its open runs, in the caller's transaction."""
    transition_update(conn, update_id, UpdateStatus.CANCELLED, reason)
    conn.execute(
        update(prompt_run)
        .where(prompt_run.c.update_id == update_id, prompt_run.c.status.in_(list(RUN_OPEN)))
        .values(status=RunStatus.CANCELLED, reason=reason, finished_at=db_now(), lease_token=None)
    )


def updates_for_sha(conn: Connection, sha: str, prompt_name: str | None = None) -> list[Update]:
    stmt = select(prompt_update).where(prompt_update.c.source_sha == sha)
    if prompt_name:
        stmt = stmt.where(prompt_update.c.prompt_name == prompt_name)
    return [_update(r) for r in conn.execute(stmt.order_by(prompt_update.c.id))]


def update_statuses(conn: Connection, update_ids: list[int]) -> dict[int, str]:
    """The status of each of these updates (unknown ids are absent): one primary-key IN
    read, what the service's shared watcher polls for all its waiters at once."""
    if not update_ids:
        return {}
    rows = conn.execute(
        select(prompt_update.c.id, prompt_update.c.status).where(prompt_update.c.id.in_(sorted(set(update_ids))))
    )
    return {r.id: r.status for r in rows}


def list_updates(
    conn: Connection,
    limit: int = 20,
    prompt_name: str | None = None,
    *,
    status: str | None = None,
    sha_prefix: str | None = None,
    before_id: int | None = None,
) -> list[Update]:
    """Newest first. ``sha_prefix``: commit SHAs starting with it (the caller passes hex
    digits only, so it holds no LIKE wildcard); ``before_id``: the next page, older than it."""
    u = prompt_update
    stmt = select(u).order_by(u.c.id.desc()).limit(limit)
    if prompt_name:
        stmt = stmt.where(u.c.prompt_name == prompt_name)
    if status:
        stmt = stmt.where(u.c.status == status)
    if sha_prefix:
        stmt = stmt.where(u.c.source_sha.like(sha_prefix + "%"))
    if before_id is not None:
        stmt = stmt.where(u.c.id < before_id)
    return [_update(r) for r in conn.execute(stmt)]


def any_open_update(conn: Connection) -> bool:
    """Is there work anywhere: an open update, or a live request (a rollback, a canary's
    decision) waiting for the reconcile step? One statement of two index probes, on
    (status, id) each: what an idle fleet asks."""
    open_update = exists().where(prompt_update.c.status.in_([UpdateStatus.PENDING, UpdateStatus.RUNNING]))
    waiting = exists().where(live_request.c.status == LiveRequestStatus.PENDING)
    found = conn.execute(select(open_update.label("u"), waiting.label("r"))).first()
    return found is not None and bool(found.u or found.r)


def reconcile_candidates_query(limit: int):
    """RUNNING updates none of whose runs is still open, on the (status, id) index; the
    NOT EXISTS probes (update_id, status). Not a locking read, for the reason
    ``finalize_candidates_query`` gives: each update is locked afterwards and checked again."""
    open_run = exists().where(prompt_run.c.update_id == prompt_update.c.id, prompt_run.c.status.in_(list(RUN_OPEN)))
    return (
        select(prompt_update.c.id)
        .where(prompt_update.c.status == UpdateStatus.RUNNING, ~open_run)
        .order_by(prompt_update.c.id)
        .limit(limit)
    )


def lock_update_query(update_id: int):
    return (
        select(prompt_update.c.id)
        .where(prompt_update.c.id == update_id, prompt_update.c.status == UpdateStatus.RUNNING)
        .with_for_update(skip_locked=True)
    )


def reconcilable_updates(conn: Connection, limit: int) -> list[int]:
    """Updates to reconcile in this transaction: candidates, each locked (SKIP LOCKED:
    another reconciler takes it) and checked again under the lock with a plain read."""
    candidates: Sequence[int] = conn.execute(reconcile_candidates_query(limit)).scalars().all()
    return [update_id for update_id in candidates if lock_reconcilable(conn, update_id)]


def lock_reconcilable(conn: Connection, update_id: int) -> bool:
    """Lock the update for this transaction (SKIP LOCKED) when it is RUNNING with no run
    open, checked under the lock with a plain read."""
    if conn.execute(lock_update_query(update_id)).first() is None:
        return False
    statuses: Iterable[str] = conn.execute(
        select(prompt_run.c.status).where(prompt_run.c.update_id == update_id)
    ).scalars()
    return all(status not in RUN_OPEN for status in statuses)
