"""``prompt_hold``: a config a rollback moved away from — a person's rollback, a canary
ROLLED_BACK (or UNDECIDED with ``hold_undecided``), added by ``gate.store.live_transition``
in the rollback's transaction. While a hold is in force (not released) an apply-mode
submission of the same config is refused, naming the rollback (and so is its apply, should
one slip past); a submission that says it overrides the rollback releases it.

"The same config" is the same config hash, or the same ``hold_key``
(``gate.prompt.behaviour.behaviour_hash``: the config less what the model never sees nor is
judged by — its description): an edit of the description alone does not make a rolled-back
config new. A config that changes anything else (a message, the model, a parameter, a tool,
the decision) is a new candidate. A hold whose config behaves as the version restored (a
rollback of a description edit) keeps no ``hold_key``: it would hold the restored version
too."""

from __future__ import annotations

from sqlalchemy import insert, or_, select, update
from sqlalchemy.engine import Connection

from gate.records import Hold

from .dialect import db_now
from .schema import prompt_hold


def _same_config(config_hash: str, hold_key: str | None):
    h = prompt_hold
    return (
        h.c.config_hash == config_hash
        if hold_key is None
        else or_(h.c.config_hash == config_hash, h.c.hold_key == hold_key)
    )


def _hold(row) -> Hold:
    return Hold(
        prompt_name=row.prompt_name,
        config_hash=row.config_hash,
        held_version=row.held_version,
        rollback_version=row.rollback_version,
        actor=row.actor,
        reason=row.reason,
        created_at=row.created_at,
    )


def add_hold(
    conn: Connection,
    prompt_name: str,
    config_hash: str,
    held_version: int,
    rollback_version: int,
    actor: str,
    reason: str,
    hold_key: str | None = None,
) -> None:
    conn.execute(
        insert(prompt_hold).values(
            prompt_name=prompt_name,
            config_hash=config_hash,
            hold_key=hold_key,
            held_version=held_version,
            rollback_version=rollback_version,
            actor=actor,
            reason=reason,
            created_at=db_now(),
        )
    )


def holds_of(
    conn: Connection, prompt_name: str, config_hash: str | None = None, hold_key: str | None = None
) -> list[Hold]:
    """The prompt's holds in force (of one config, with ``config_hash``: that hash, or
    ``hold_key`` its ``behaviour_hash``), newest first."""
    h = prompt_hold
    stmt = select(h).where(h.c.prompt_name == prompt_name, h.c.released_at.is_(None))
    if config_hash is not None:
        stmt = stmt.where(_same_config(config_hash, hold_key))
    return [_hold(r) for r in conn.execute(stmt.order_by(h.c.id.desc()))]


def release_holds(
    conn: Connection, prompt_name: str, config_hash: str, released_by: str, hold_key: str | None = None
) -> int:
    """Release the config's holds (an overriding submission; ``hold_key`` as ``holds_of``);
    returns how many."""
    h = prompt_hold
    return conn.execute(
        update(h)
        .where(h.c.prompt_name == prompt_name, _same_config(config_hash, hold_key), h.c.released_at.is_(None))
        .values(released_at=db_now(), released_by=released_by[:191])
    ).rowcount
