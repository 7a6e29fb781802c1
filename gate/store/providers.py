"""The providers the gate config declares (``gate.providers``): one row per name."""

from __future__ import annotations

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from ..providers import ProviderDecl
from .dialect import db_now
from .schema import provider


def list_providers(conn: Connection) -> dict[str, ProviderDecl]:
    return {r.name: ProviderDecl(r.name, r.base_url, r.api_key_env, tuple(r.models or ()))
            for r in conn.execute(select(provider).order_by(provider.c.name))}


def upsert_provider(conn: Connection, decl: ProviderDecl) -> bool:
    """Declare a provider, or change its declaration. Returns True when created."""
    values = {"base_url": decl.base_url, "api_key_env": decl.api_key_env, "models": list(decl.models),
              "updated_at": db_now()}
    if conn.execute(update(provider).where(provider.c.name == decl.name).values(**values)).rowcount:
        return False
    conn.execute(insert(provider).values(name=decl.name, **values))
    return True


def delete_provider(conn: Connection, name: str) -> bool:
    return conn.execute(delete(provider).where(provider.c.name == name)).rowcount > 0
