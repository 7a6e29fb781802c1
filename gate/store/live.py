"""The live ``prompt`` table (one row per prompt: the version in production) and its
``prompt_version`` history. Its two writing statements — an apply of an update that cleared
every bar (``write_live``) and a rollback, a person's or a canary's, restoring an earlier
version's config as a new version (``restore_live``) — are run by one module alone, the
reconcile step's ``gate.store.live_transition`` (``tests/unit/test_who_writes.py``); both
guard on the version the writer saw, so of two racing writers exactly one moves the version on.

Each version carries the provider declaration it was evaluated with (``provider``,
``provider_pinned``): the one its applying update pinned at submit, and for a rollback the
restored version's. Production's runtime calls that one (``version_provider``), whatever
the gate config's providers say later."""

from __future__ import annotations

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gate.errors import IllegalTransition, NotFound
from gate.records import LivePrompt, Update

from .dialect import db_now
from .schema import prompt, prompt_update, prompt_version


def find_live(conn: Connection, name: str) -> LivePrompt | None:
    """The live version, and how it went live (an apply, or a rollback: to which version,
    by whom, why) from its history row."""
    row = conn.execute(select(prompt).where(prompt.c.name == name)).first()
    if row is None:
        return None
    how = conn.execute(
        select(
            prompt_version.c.kind, prompt_version.c.restored_version, prompt_version.c.actor, prompt_version.c.reason
        ).where(prompt_version.c.prompt_name == name, prompt_version.c.version == row.version)
    ).first()
    if how is not None and how.kind == "rollback":
        return LivePrompt(
            row.name,
            row.version,
            row.config,
            row.config_hash,
            row.applied_update_id,
            row.updated_at,
            "rollback",
            how.restored_version,
            how.actor,
            how.reason,
        )
    return LivePrompt(row.name, row.version, row.config, row.config_hash, row.applied_update_id, row.updated_at)


def live_version(conn: Connection, name: str) -> int:
    return conn.execute(select(prompt.c.version).where(prompt.c.name == name)).scalar() or 0


def write_live(conn: Connection, upd: Update) -> bool:
    """Apply an update's candidate to the live table, guarded by ``version = base_version``,
    and record the history row, both with the provider declaration the update pinned.
    False when the live row moved on since submit."""
    new_version = upd.base_version + 1
    pinned = {
        "provider": conn.execute(select(prompt_update.c.provider).where(prompt_update.c.id == upd.id)).scalar(),
        "provider_pinned": 1,
    }
    if upd.base_version == 0:
        try:
            with conn.begin_nested():
                conn.execute(
                    insert(prompt).values(
                        name=upd.prompt_name,
                        version=1,
                        config=upd.candidate_config,
                        config_hash=upd.candidate_hash,
                        applied_update_id=upd.id,
                        updated_at=db_now(),
                        **pinned,
                    )
                )
        except IntegrityError:
            return False
    else:
        moved = conn.execute(
            update(prompt)
            .where(prompt.c.name == upd.prompt_name, prompt.c.version == upd.base_version)
            .values(
                version=new_version,
                config=upd.candidate_config,
                config_hash=upd.candidate_hash,
                applied_update_id=upd.id,
                updated_at=db_now(),
                **pinned,
            )
        ).rowcount
        if moved != 1:
            return False
    conn.execute(
        insert(prompt_version).values(
            prompt_name=upd.prompt_name,
            version=new_version,
            config=upd.candidate_config,
            config_hash=upd.candidate_hash,
            update_id=upd.id,
            applied_at=db_now(),
            **pinned,
        )
    )
    return True


def restore_live(conn: Connection, name: str, seen_version: int, target_version: int, actor: str, reason: str) -> int:
    """Make version ``target_version``'s config (and the provider it was evaluated with)
    live again as version ``seen_version + 1``, guarded by the live version still being
    ``seen_version``; record it in the history as a rollback (who, why). Returns the new
    version. IllegalTransition when the live version moved on; NotFound when there is no
    such version."""
    target = conn.execute(
        select(prompt_version).where(prompt_version.c.prompt_name == name, prompt_version.c.version == target_version)
    ).first()
    if target is None:
        raise NotFound(f"prompt {name!r} has no version {target_version}")
    new_version = seen_version + 1
    pinned = {"provider": target.provider, "provider_pinned": target.provider_pinned}
    moved = conn.execute(
        update(prompt)
        .where(prompt.c.name == name, prompt.c.version == seen_version)
        .values(
            version=new_version,
            config=target.config,
            config_hash=target.config_hash,
            applied_update_id=target.update_id,
            updated_at=db_now(),
            **pinned,
        )
    ).rowcount
    if moved != 1:
        now = live_version(conn, name)
        raise IllegalTransition(
            f"prompt {name}: the live version is {now}, not {seen_version} as seen: "
            "nothing was rolled back; look again and retry"
        )
    conn.execute(
        insert(prompt_version).values(
            prompt_name=name,
            version=new_version,
            config=target.config,
            config_hash=target.config_hash,
            update_id=target.update_id,
            applied_at=db_now(),
            kind="rollback",
            restored_version=target_version,
            actor=actor,
            reason=reason,
            **pinned,
        )
    )
    return new_version


def prompt_history(conn: Connection, name: str) -> list[dict]:
    """Every live version of the prompt, newest first: version, config, config_hash,
    update_id (the update whose candidate it is), applied_at, kind ('apply' or
    'rollback'), and for a rollback restored_version, actor and reason."""
    rows = conn.execute(
        select(prompt_version).where(prompt_version.c.prompt_name == name).order_by(prompt_version.c.version.desc())
    )
    return [{k: v for k, v in r._mapping.items() if k not in HISTORY_HIDDEN} for r in rows]


HISTORY_HIDDEN = ("id", "provider", "provider_pinned")  # a provider's URL and key variable: not for every reader


def version_provider(conn: Connection, name: str, version: int) -> tuple[bool, dict | None]:
    """(pinned, declaration) of version ``version`` of the prompt: the provider declaration
    it was evaluated with (None: the default provider); pinned False when none is on record
    (it went live before the gate pinned providers, with no update to take it from)."""
    row = conn.execute(
        select(prompt_version.c.provider, prompt_version.c.provider_pinned).where(
            prompt_version.c.prompt_name == name, prompt_version.c.version == version
        )
    ).first()
    return (False, None) if row is None or not row.provider_pinned else (True, row.provider)


def live_providers(conn: Connection) -> dict[str, dict | None]:
    """Prompt name → the provider declaration its live version is pinned to (None: the
    default provider), for every live version that has one on record."""
    rows = conn.execute(select(prompt.c.name, prompt.c.provider).where(prompt.c.provider_pinned == 1))
    return {r.name: r.provider for r in rows}


def live_names(conn: Connection, names: list[str]) -> set[str]:
    """Those of ``names`` that have a live version."""
    if not names:
        return set()
    return set(conn.execute(select(prompt.c.name).where(prompt.c.name.in_(names))).scalars())


def list_live(conn: Connection) -> list[dict]:
    """Every live prompt: name, version, config_hash, updated_at (``drift``: live only)."""
    rows = conn.execute(select(prompt.c.name, prompt.c.version, prompt.c.config_hash, prompt.c.updated_at))
    return [dict(r._mapping) for r in rows]


def version_config(conn: Connection, name: str, version: int) -> dict | None:
    """One version of the prompt as its history keeps it: config, config_hash and the
    provider it was evaluated with (``provider``, ``provider_pinned``): a canary rollout's
    stable version, which the runtime serves beside the live one."""
    row = conn.execute(
        select(
            prompt_version.c.config,
            prompt_version.c.config_hash,
            prompt_version.c.provider,
            prompt_version.c.provider_pinned,
        ).where(prompt_version.c.prompt_name == name, prompt_version.c.version == version)
    ).first()
    return None if row is None else dict(row._mapping)


def known_config(conn: Connection, name: str) -> dict | None:
    """The prompt's config as the gate knows it: its live version's, else its latest
    submission's (None: never submitted). What `dataset map` reads the prompt's kind from."""
    row = conn.execute(select(prompt.c.config).where(prompt.c.name == name)).first()
    if row is None:
        row = conn.execute(
            select(prompt_update.c.candidate_config.label("config"))
            .where(prompt_update.c.prompt_name == name)
            .order_by(prompt_update.c.id.desc())
            .limit(1)
        ).first()
    return None if row is None else row.config
