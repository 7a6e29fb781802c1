"""Per-prompt settings the gate config declares (``prompt_setting``): one row per prompt
that has any. Today one setting: ``optional_fields``, the item fields a prompt's templates
may read although no row of its datasets has them (``gate.domain.admission``)."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection

from .dialect import db_now, update_or_insert
from .schema import prompt_setting


def list_optional_fields(conn: Connection) -> dict[str, list[str]]:
    """prompt name → its optional fields, for every prompt that declares some."""
    s = prompt_setting
    return {
        r.prompt_name: list(r.optional_fields or [])
        for r in conn.execute(select(s.c.prompt_name, s.c.optional_fields).order_by(s.c.prompt_name))
        if r.optional_fields
    }


def optional_fields(conn: Connection, prompt_name: str) -> list[str]:
    s = prompt_setting
    found = conn.execute(select(s.c.optional_fields).where(s.c.prompt_name == prompt_name)).scalar()
    return list(found or [])


def set_optional_fields(conn: Connection, prompt_name: str, fields: list[str]) -> bool:
    """Set a prompt's optional fields (sorted), creating its settings row. True when created."""
    return update_or_insert(
        conn, prompt_setting, {"prompt_name": prompt_name}, {"optional_fields": sorted(fields), "updated_at": db_now()}
    )


def delete_prompt_setting(conn: Connection, prompt_name: str) -> bool:
    return conn.execute(delete(prompt_setting).where(prompt_setting.c.prompt_name == prompt_name)).rowcount > 0
