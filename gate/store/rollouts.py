"""Canary rollouts (``prompt_rollout``; ``gate.states.RolloutStatus``) and the rollout config
the gate config declares per prompt and an apply-mode update pins at submit.

Every step is one guarded UPDATE from the states ``gate.states.ROLLOUT_STEPS`` allows, its
row count checked, and run by the reconcile step's ``gate.store.live_transition`` alone:
it starts a rollout (``start_rollout``, in the transaction that applies the update) and
ends the prompt's previous one SUPERSEDED (``supersede_rollout``), as does a rollback; it
ends one PROMOTED, ROLLED_BACK or UNDECIDED (``end_rollout``) when it carries out the
decision the rollout worker asked for, the rollout's row locked with SKIP LOCKED first
(``lock_rollout``) by the worker that decided."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from gate.errors import IllegalTransition
from gate.records import Rollout
from gate.states import RolloutStatus, rollout_sources

from .dialect import db_now, seconds_since, update_or_insert
from .schema import prompt_rollout, prompt_setting, prompt_update


def _rollout(row) -> Rollout:
    return Rollout(
        int(row.id),
        row.prompt_name,
        int(row.update_id),
        int(row.canary_version),
        int(row.stable_version),
        row.status,
        row.config,
        row.started_at,
        row.decided_at,
        row.figures,
        row.reason,
    )


# --- the gate config's rollout: per prompt, pinned on an apply at submit --------------------


def rollout_settings(conn: Connection) -> dict[str, dict]:
    """prompt name → its rollout config, for every prompt the gate config gives one."""
    s = prompt_setting
    return {r.prompt_name: r.rollout for r in conn.execute(select(s.c.prompt_name, s.c.rollout)) if r.rollout}


def set_rollout_setting(conn: Connection, prompt_name: str, config: dict | None) -> bool:
    """Set (None: clear) a prompt's rollout config, creating its settings row. True when
    created."""
    return update_or_insert(
        conn, prompt_setting, {"prompt_name": prompt_name}, {"rollout": config, "updated_at": db_now()}
    )


def pin_rollout(conn: Connection, update_id: int, prompt_name: str) -> dict | None:
    """Pin the prompt's rollout config (None: none) on an apply-mode update at submit."""
    config = conn.execute(select(prompt_setting.c.rollout).where(prompt_setting.c.prompt_name == prompt_name)).scalar()
    if config:
        conn.execute(update(prompt_update).where(prompt_update.c.id == update_id).values(rollout=config))
    return config or None


def update_rollout(conn: Connection, update_id: int) -> dict | None:
    """The rollout config an update pinned at submit (None: it goes live at 100 %)."""
    return conn.execute(select(prompt_update.c.rollout).where(prompt_update.c.id == update_id)).scalar() or None


# --- rollouts -----------------------------------------------------------------------------------


def start_rollout(
    conn: Connection, prompt_name: str, update_id: int, canary: int, stable: int, config: dict[str, Any]
) -> int:
    """A new rollout in CANARY: version ``canary`` (just applied by ``update_id``) beside
    ``stable``. Run in the apply's transaction."""
    key = conn.execute(
        insert(prompt_rollout).values(
            prompt_name=prompt_name,
            update_id=update_id,
            canary_version=canary,
            stable_version=stable,
            status=RolloutStatus.CANARY,
            config=config,
            started_at=db_now(),
        )
    ).inserted_primary_key
    assert key is not None  # an INSERT of one row
    return key[0]


def active_rollout(conn: Connection, prompt_name: str) -> Rollout | None:
    """The prompt's rollout in CANARY, if any."""
    row = conn.execute(
        select(prompt_rollout)
        .where(prompt_rollout.c.prompt_name == prompt_name, prompt_rollout.c.status == RolloutStatus.CANARY)
        .order_by(prompt_rollout.c.id.desc())
        .limit(1)
    ).first()
    return _rollout(row) if row else None


def active_rollouts(conn: Connection, prompt_names: list[str]) -> dict[str, Rollout]:
    """prompt name → its rollout in CANARY, for those of ``prompt_names`` that have one."""
    if not prompt_names:
        return {}
    rows = conn.execute(
        select(prompt_rollout).where(
            prompt_rollout.c.prompt_name.in_(prompt_names), prompt_rollout.c.status == RolloutStatus.CANARY
        )
    )
    return {r.prompt_name: _rollout(r) for r in rows}


def rollout_submitters(conn: Connection, rollout_ids: list[int]) -> dict[int, str | None]:
    """rollout id → the name of the token that submitted the apply that started it (None:
    the CLI on the database)."""
    if not rollout_ids:
        return {}
    rows = conn.execute(
        select(prompt_rollout.c.id, prompt_update.c.submitted_by)
        .join(prompt_update, prompt_update.c.id == prompt_rollout.c.update_id)
        .where(prompt_rollout.c.id.in_(rollout_ids))
    )
    return {int(rid): None if who is None else str(who) for rid, who in rows.tuples()}


def get_rollout(conn: Connection, rollout_id: int) -> Rollout | None:
    row = conn.execute(select(prompt_rollout).where(prompt_rollout.c.id == rollout_id)).first()
    return _rollout(row) if row else None


def rollout_of_update(conn: Connection, update_id: int) -> Rollout | None:
    row = conn.execute(select(prompt_rollout).where(prompt_rollout.c.update_id == update_id)).first()
    return _rollout(row) if row else None


def rollout_states(conn: Connection, update_ids: Iterable[int]) -> dict[int, str]:
    """update id → the state of the rollout its apply started, for those of ``update_ids``
    that started one (the status page's lists: one indexed read per page)."""
    ids = sorted({int(i) for i in update_ids})
    if not ids:
        return {}
    rows = conn.execute(
        select(prompt_rollout.c.update_id, prompt_rollout.c.status).where(prompt_rollout.c.update_id.in_(ids))
    )
    return {int(r.update_id): str(r.status) for r in rows}


def rollouts_of_prompt(conn: Connection, prompt_name: str, limit: int = 20) -> list[Rollout]:
    """The prompt's rollouts, newest first."""
    rows = conn.execute(
        select(prompt_rollout)
        .where(prompt_rollout.c.prompt_name == prompt_name)
        .order_by(prompt_rollout.c.id.desc())
        .limit(limit)
    )
    return [_rollout(r) for r in rows]


def canary_rollouts(conn: Connection, limit: int, after: int = 0) -> list[int]:
    """Rollouts in CANARY with an id above ``after``, oldest first: the rollout worker's
    candidates, a page at a time (a plain read; each is locked by ``lock_rollout`` before a
    decision)."""
    ids: Iterable[int] = conn.execute(
        select(prompt_rollout.c.id)
        .where(prompt_rollout.c.status == RolloutStatus.CANARY, prompt_rollout.c.id > after)
        .order_by(prompt_rollout.c.id)
        .limit(limit)
    ).scalars()
    return [int(i) for i in ids]


def lock_rollout(conn: Connection, rollout_id: int) -> tuple[Rollout, float] | None:
    """The rollout locked for a decision (FOR UPDATE SKIP LOCKED: another worker deciding it
    is skipped) and the hours since it started, by the database's clock; None when it is
    locked elsewhere or no longer in CANARY."""
    row = conn.execute(
        select(prompt_rollout, seconds_since(prompt_rollout.c.started_at).label("age"))
        .where(prompt_rollout.c.id == rollout_id, prompt_rollout.c.status == RolloutStatus.CANARY)
        .with_for_update(skip_locked=True)
    ).first()
    return None if row is None else (_rollout(row), max(0.0, float(row.age or 0.0)) / 3600)


def rollout_hours(conn: Connection, rollout_id: int) -> float:
    """Hours since the rollout started, by the database's clock."""
    age = conn.execute(
        select(seconds_since(prompt_rollout.c.started_at)).where(prompt_rollout.c.id == rollout_id)
    ).scalar()
    return max(0.0, float(age or 0.0)) / 3600


def end_rollout(conn: Connection, rollout_id: int, to: RolloutStatus, figures: dict | None, reason: str) -> None:
    """One guarded UPDATE from the states the state machine allows (the rollout worker's
    decision); IllegalTransition, naming the state found, when the rollout is not in one."""
    sources = rollout_sources(to)
    moved = conn.execute(
        update(prompt_rollout)
        .where(prompt_rollout.c.id == rollout_id, prompt_rollout.c.status.in_(list(sources)))
        .values(status=to, decided_at=db_now(), figures=figures, reason=reason)
    ).rowcount
    if moved != 1:
        now = conn.execute(select(prompt_rollout.c.status).where(prompt_rollout.c.id == rollout_id)).scalar()
        raise IllegalTransition(f"rollout {rollout_id} cannot move to {to}: it is {now or 'missing'}")


def supersede_rollout(conn: Connection, prompt_name: str, reason: str) -> int | None:
    """End the prompt's rollout in CANARY, if any, SUPERSEDED (an apply or a rollback during
    it), guarded by its status. Returns its id, or None when there was none."""
    found = active_rollout(conn, prompt_name)
    if found is None:
        return None
    end_rollout(conn, found.id, RolloutStatus.SUPERSEDED, found.figures, reason)
    return found.id
