"""The providers the gate config declares (``gate.calls.providers``): one row per name."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection

from gate.calls.providers import ProviderDecl

from .dialect import db_now, update_or_insert
from .schema import provider


def list_providers(conn: Connection) -> dict[str, ProviderDecl]:
    return {
        r.name: ProviderDecl(r.name, r.base_url, r.api_key_env, tuple(r.models or ()))
        for r in conn.execute(select(provider).order_by(provider.c.name))
    }


def upsert_provider(conn: Connection, decl: ProviderDecl) -> bool:
    """Declare a provider, or change its declaration. Returns True when created."""
    values = {
        "base_url": decl.base_url,
        "api_key_env": decl.api_key_env,
        "models": list(decl.models),
        "updated_at": db_now(),
    }
    return update_or_insert(conn, provider, {"name": decl.name}, values)


def delete_provider(conn: Connection, name: str) -> bool:
    return conn.execute(delete(provider).where(provider.c.name == name)).rowcount > 0
