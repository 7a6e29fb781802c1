"""``live_request``: a person's rollback or a canary's decision, waiting to be carried out by
the reconcile step (``gate.domain.live_transition``), which alone writes the live row.

A request is inserted PENDING (``request_rollback``, ``request_canary_decision``); the step
claims it with ``FOR UPDATE SKIP LOCKED`` (``claim_live_request``: a request being carried
out by another process is skipped, so none is carried out twice) and ends it DONE or REFUSED
in the same transaction as the live row (``end_live_request``: one guarded UPDATE from the
states ``gate.states.LIVE_REQUEST_STEPS`` allows, its row count checked)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from gate.errors import IllegalTransition
from gate.records.live_request import LiveRequest
from gate.states import LiveRequestStatus, live_request_sources

from .dialect import db_now, seconds_since
from .schema import live_request

ROLLBACK = "rollback"
CANARY = "canary"


def _request(row) -> LiveRequest:
    return LiveRequest(
        id=int(row.id),
        prompt_name=row.prompt_name,
        kind=row.kind,
        status=row.status,
        seen_version=int(row.seen_version),
        target_version=int(row.target_version),
        rollout_id=None if row.rollout_id is None else int(row.rollout_id),
        decision=row.decision,
        figures=row.figures,
        actor=row.actor,
        reason=row.reason,
        outcome=row.outcome,
        refusal=row.refusal,
    )


def _insert(conn: Connection, **values) -> int:
    key = conn.execute(
        insert(live_request).values(status=LiveRequestStatus.PENDING, requested_at=db_now(), **values)
    ).inserted_primary_key
    assert key is not None  # an INSERT of one row
    return int(key[0])


def request_rollback(
    conn: Connection, prompt_name: str, seen_version: int, target_version: int, actor: str, reason: str
) -> int:
    """A person's rollback to ``target_version``, as seen at ``seen_version``: its id."""
    return _insert(
        conn,
        prompt_name=prompt_name,
        kind=ROLLBACK,
        seen_version=seen_version,
        target_version=target_version,
        actor=actor[:191],
        reason=reason,
    )


def request_canary_decision(
    conn: Connection,
    prompt_name: str,
    rollout_id: int,
    canary_version: int,
    target_version: int,
    decision: str,
    figures: dict | None,
    reason: str,
) -> int | None:
    """A canary's decision (PROMOTED, ROLLED_BACK, UNDECIDED), seen at its canary version:
    its id, or None when the rollout has a request already (``uq_live_request_rollout``)."""
    if canary_request(conn, rollout_id) is not None:
        return None
    return _insert(
        conn,
        prompt_name=prompt_name,
        kind=CANARY,
        seen_version=canary_version,
        target_version=target_version,
        rollout_id=rollout_id,
        decision=decision,
        figures=figures,
        actor=f"rollout {rollout_id}",
        reason=reason,
    )


def canary_request(conn: Connection, rollout_id: int) -> LiveRequest | None:
    row = conn.execute(select(live_request).where(live_request.c.rollout_id == rollout_id)).first()
    return _request(row) if row else None


def get_live_request(conn: Connection, request_id: int) -> LiveRequest | None:
    row = conn.execute(select(live_request).where(live_request.c.id == request_id)).first()
    return _request(row) if row else None


def pending_live_requests(conn: Connection, limit: int) -> list[int]:
    """PENDING requests, oldest first, on the (status, id) index: a plain read; each is
    claimed by ``claim_live_request`` before it is carried out."""
    ids: Iterable[int] = conn.execute(
        select(live_request.c.id)
        .where(live_request.c.status == LiveRequestStatus.PENDING)
        .order_by(live_request.c.id)
        .limit(limit)
    ).scalars()
    return [int(i) for i in ids]


def claim_live_request(conn: Connection, request_id: int) -> LiveRequest | None:
    """The request locked until the caller's transaction ends (FOR UPDATE SKIP LOCKED: one
        being carried out elsewhere is skipped), with its age by the database's clock; None when
    locked elsewhere or no longer PENDING."""
    row = conn.execute(
        select(live_request, seconds_since(live_request.c.requested_at).label("age"))
        .where(live_request.c.id == request_id, live_request.c.status == LiveRequestStatus.PENDING)
        .with_for_update(skip_locked=True)
    ).first()
    return None if row is None else replace(_request(row), age_seconds=max(0.0, float(row.age or 0.0)))


def end_live_request(
    conn: Connection, request_id: int, to: LiveRequestStatus, outcome: dict | None, refusal: str | None = None
) -> None:
    """One guarded UPDATE from the states the state machine allows; IllegalTransition, naming
    the state found, when the request is not in one."""
    moved = conn.execute(
        update(live_request)
        .where(live_request.c.id == request_id, live_request.c.status.in_(list(live_request_sources(to))))
        .values(status=to, outcome=outcome, refusal=refusal, ended_at=db_now())
    ).rowcount
    if moved != 1:
        now = conn.execute(select(live_request.c.status).where(live_request.c.id == request_id)).scalar()
        raise IllegalTransition(f"live request {request_id} cannot move to {to}: it is {now or 'missing'}")
