"""The HTTP service's bearer tokens (``api_token``): a name, a scope and the SHA-256 of
the token (never the token); revoked tokens keep their row, so a name is never reused
and the list shows when each was revoked. And the status page's sign-in sessions
(``page_session``): the SHA-256 of the cookie's value and the token it was opened with; a
session reads as that token while the token is live and the session unexpired."""

from __future__ import annotations

import json
from collections.abc import Iterable

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gate.errors import NotFound, UsageError
from gate.records import ApiToken

from .dialect import db_now
from .schema import api_token, page_session


def insert_token(conn: Connection, name: str, scope: str, token_hash: str, prompts: list[str] | None = None) -> None:
    if conn.execute(select(api_token.c.id).where(api_token.c.name == name)).first() is not None:
        raise UsageError(f"a token named {name!r} exists (names are never reused, even revoked): choose another name")
    try:
        with conn.begin_nested():
            conn.execute(
                insert(api_token).values(
                    name=name,
                    scope=scope,
                    token_hash=token_hash,
                    created_at=db_now(),
                    prompts=None if prompts is None else json.dumps(prompts),
                )
            )
    except IntegrityError:
        raise UsageError(f"a token named {name!r} exists: choose another name") from None


def list_tokens(conn: Connection) -> list[ApiToken]:
    return [_token(r) for r in conn.execute(select(api_token).order_by(api_token.c.id))]


def find_token_by_hash(conn: Connection, token_hash: str) -> ApiToken | None:
    """The token whose hash this is, revoked or not: one unique-index read."""
    row = conn.execute(select(api_token).where(api_token.c.token_hash == token_hash)).first()
    return _token(row) if row else None


def touch_token(conn: Connection, token_id: int) -> None:
    conn.execute(update(api_token).where(api_token.c.id == token_id).values(last_used_at=db_now()))


def revoke_token(conn: Connection, name: str) -> bool:
    """Revoke the token NAME. Returns False when it was revoked already."""
    if conn.execute(select(api_token.c.id).where(api_token.c.name == name)).first() is None:
        raise NotFound(f"no token named {name!r}")
    return (
        conn.execute(
            update(api_token)
            .where(api_token.c.name == name, api_token.c.revoked_at.is_(None))
            .values(revoked_at=db_now())
        ).rowcount
        == 1
    )


def _token(r) -> ApiToken:
    return ApiToken(
        id=r.id,
        name=r.name,
        scope=r.scope,
        token_hash=r.token_hash,
        created_at=r.created_at,
        last_used_at=r.last_used_at,
        revoked_at=r.revoked_at,
        prompts=tuple(json.loads(r.prompts)) if r.prompts else None,
    )


# --- the status page's sessions ---------------------------------------------------------------


def insert_session(conn: Connection, session_hash: str, token_id: int, seconds: float) -> None:
    conn.execute(
        insert(page_session).values(
            session_hash=session_hash, token_id=token_id, created_at=db_now(), expires_at=db_now(seconds)
        )
    )


def find_session(conn: Connection, session_hash: str) -> ApiToken | None:
    """The live token a session was opened with, or None (no such session, expired, or its
    token revoked): one primary-key read joined to the token's row."""
    row = conn.execute(
        select(api_token)
        .join(page_session, page_session.c.token_id == api_token.c.id)
        .where(
            page_session.c.session_hash == session_hash,
            page_session.c.expires_at > db_now(),
            api_token.c.revoked_at.is_(None),
        )
    ).first()
    return _token(row) if row else None


def delete_session(conn: Connection, session_hash: str) -> bool:
    return conn.execute(delete(page_session).where(page_session.c.session_hash == session_hash)).rowcount == 1


def prune_sessions(conn: Connection, token_id: int, keep: int) -> int:
    """Delete the expired sessions, and the token's sessions past its ``keep`` newest (one
    token signing in again and again holds at most ``keep`` rows)."""
    gone = conn.execute(delete(page_session).where(page_session.c.expires_at <= db_now())).rowcount
    newest: Iterable[str] = conn.execute(
        select(page_session.c.session_hash)
        .where(page_session.c.token_id == token_id)
        .order_by(page_session.c.created_at.desc())
        .offset(keep)
    ).scalars()
    extra = list(newest)
    if extra:
        gone += conn.execute(delete(page_session).where(page_session.c.session_hash.in_(extra))).rowcount
    return gone
