"""The live ``prompt`` table (one row per prompt: the version in production) and its
``prompt_version`` history. Only reconcile writes them (``write_live``)."""

from __future__ import annotations

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from ..models import LivePrompt, Update
from .dialect import db_now
from .schema import prompt, prompt_version


def find_live(conn: Connection, name: str) -> LivePrompt | None:
    row = conn.execute(select(prompt).where(prompt.c.name == name)).first()
    if row is None:
        return None
    return LivePrompt(row.name, row.version, row.config, row.config_hash, row.applied_update_id, row.updated_at)


def live_version(conn: Connection, name: str) -> int:
    return conn.execute(select(prompt.c.version).where(prompt.c.name == name)).scalar() or 0


def write_live(conn: Connection, upd: Update) -> bool:
    """Apply an update's candidate to the live table, guarded by ``version = base_version``,
    and record the history row. False when the live row moved on since submit."""
    new_version = upd.base_version + 1
    if upd.base_version == 0:
        try:
            with conn.begin_nested():
                conn.execute(insert(prompt).values(name=upd.prompt_name, version=1, config=upd.candidate_config,
                                                   config_hash=upd.candidate_hash, applied_update_id=upd.id,
                                                   updated_at=db_now()))
        except IntegrityError:
            return False
    else:
        moved = conn.execute(update(prompt)
                             .where(prompt.c.name == upd.prompt_name, prompt.c.version == upd.base_version)
                             .values(version=new_version, config=upd.candidate_config,
                                     config_hash=upd.candidate_hash, applied_update_id=upd.id,
                                     updated_at=db_now())).rowcount
        if moved != 1:
            return False
    conn.execute(insert(prompt_version).values(prompt_name=upd.prompt_name, version=new_version,
                                               config=upd.candidate_config, config_hash=upd.candidate_hash,
                                               update_id=upd.id, applied_at=db_now()))
    return True


def prompt_history(conn: Connection, name: str) -> list[dict]:
    rows = conn.execute(select(prompt_version).where(prompt_version.c.prompt_name == name)
                        .order_by(prompt_version.c.version))
    return [dict(r._mapping) for r in rows]
