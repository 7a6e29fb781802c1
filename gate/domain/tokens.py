"""The HTTP service's bearer tokens, on the domain API (``Tokens``, a service of ``Gate``).

A token is ``pgt_`` and 43 random URL-safe characters (256 bits), printed once at
creation; the database keeps only its SHA-256, so a leaked database leaks no token. A
presented token is hashed and looked up by that hash (a unique index), then the stored
hash is compared with ``hmac.compare_digest``: what a guesser can time is a lookup of a
hash they cannot steer, never a prefix match of the secret.

Scopes nest: ``read`` (every GET and the status page) < ``submit`` (read, and submit,
cancel, wait) < ``admin`` (everything: datasets, bars, sync, tokens). Beside them,
``feedback`` is production's: it sends a canary rollout's outcomes (``POST /v1/feedback``)
and nothing else, not even a read; admin may send feedback too, and submit for the rollouts
its own applies started (``Rollouts.record_feedback`` asks which).

``runtime`` (issue 48) is production's token scoped to prompts (``create_token(name,
"runtime", prompts=[...])``): it loads those prompts (with a canary rollout's call key, so
its runtime's call ids verify), reports what it serves of them and sends their feedback,
and nothing else; a read token still loads any prompt, without the call key.

The status page signs a browser in with a **session**, never the token: ``pgs_`` and 43
random characters in its cookie, of which the database keeps the SHA-256 and the token it
was opened with. A stolen cookie reads pages as that token until the session expires or
the token is revoked, and is no API token: it cannot be presented as a bearer token."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from sqlalchemy.engine import Engine

from gate import db
from gate.errors import UsageError
from gate.records import ApiToken
from gate.store.tokens import (
    delete_session,
    find_session,
    find_token_by_hash,
    insert_session,
    insert_token,
    list_tokens,
    prune_sessions,
    revoke_token,
    touch_token,
)

from .boundary import driver_errors_become_gate_errors

SCOPES = ("read", "submit", "admin")  # nested, smallest first
FEEDBACK = "feedback"  # beside the nest: feedback only (docs/security.md)
RUNTIME = "runtime"  # beside the nest: load, report and send feedback for its prompts only
SERVE = "serve"  # what a route needs to load a prompt or report what is served: read, or runtime
ALL_SCOPES = (*SCOPES, FEEDBACK, RUNTIME)
MAX_TOKEN_PROMPTS = 200
TOKEN_PREFIX = "pgt_"
SESSION_PREFIX = "pgs_"
SESSIONS_PER_TOKEN = 20  # a token signed in again and again keeps its newest sessions only
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def scope_allows(granted: str, needed: str) -> bool:
    """Does a token of scope ``granted`` allow what needs ``needed``? The nested scopes by
    their order; feedback is allowed to a feedback, submit or admin token, and a feedback
    token allows nothing else."""
    if needed == FEEDBACK:
        return granted in (FEEDBACK, RUNTIME, "submit", "admin")
    if needed == SERVE:
        return granted in (RUNTIME, *SCOPES)
    return granted in SCOPES and needed in SCOPES and SCOPES.index(granted) >= SCOPES.index(needed)


def token_prompts(token: ApiToken) -> frozenset[str] | None:
    """The prompts a token may run (a runtime token's); None: not a runtime token."""
    return frozenset(token.prompts or ()) if token.scope == RUNTIME else None


def check_prompts(scope: str, prompts) -> list[str] | None:
    """A runtime token's prompts, checked (each a prompt name, at least one); None for
    every other scope, which takes none."""
    from gate.prompt.call_settings import NAME_RE as PROMPT_NAME_RE

    if scope != RUNTIME:
        if prompts:
            raise UsageError("--prompts is for a runtime token (--scope runtime)")
        return None
    if isinstance(prompts, str):
        prompts = [p.strip() for p in prompts.split(",")]
    if not isinstance(prompts, (list, tuple)) or not prompts or len(prompts) > MAX_TOKEN_PROMPTS:
        raise UsageError(f"a runtime token needs --prompts a,b: 1 to {MAX_TOKEN_PROMPTS} prompt names")
    for p in prompts:
        if not isinstance(p, str) or not PROMPT_NAME_RE.fullmatch(p):
            raise UsageError(f"--prompts: {str(p)[:80]!r} is not a prompt name")
    return sorted(set(prompts))


def check_scope(scope: str) -> str:
    if scope not in ALL_SCOPES:
        raise UsageError(f"scope {scope!r} is not one of {', '.join(ALL_SCOPES)}")
    return scope


@driver_errors_become_gate_errors
class Tokens:
    """Create, list, revoke and check the service's tokens and sessions, on one gate database (``engine``)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def create_token(self, name: str, scope: str, prompts: list[str] | str | None = None) -> str:
        """A new token NAME of ``scope`` (a runtime token: for ``prompts`` only); returns the
        token, which is never stored."""
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise UsageError(f"token name {str(name)[:80]!r} is not 1-128 letters, digits, '.', '_' or '-'")
        check_scope(scope)
        reach = check_prompts(scope, prompts)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        db.transaction(self.engine, lambda conn: insert_token(conn, name, scope, hash_token(token), reach))
        return token

    def list_tokens(self) -> list[ApiToken]:
        with self.engine.connect() as conn:
            return list_tokens(conn)

    def revoke_token(self, name: str) -> bool:
        """Revoke token NAME; False when it was revoked already."""
        return db.transaction(self.engine, lambda conn: revoke_token(conn, name))

    def authenticate(self, token: str | None) -> ApiToken | None:
        """The live (not revoked) token this is, else None. Marks it used."""
        if not token or not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            return None
        presented = hash_token(token)
        with self.engine.connect() as conn:
            found = find_token_by_hash(conn, presented)
        if found is None or not hmac.compare_digest(found.token_hash, presented) or found.revoked_at is not None:
            return None
        db.transaction(self.engine, lambda conn: touch_token(conn, found.id))
        return found

    def open_session(self, token: ApiToken, seconds: float) -> str:
        """A new status-page session for the live token ``token``, valid for ``seconds``;
        returns the value for the cookie (never stored: its SHA-256 is)."""
        value = SESSION_PREFIX + secrets.token_urlsafe(32)

        def store_it(conn) -> None:
            insert_session(conn, hash_token(value), token.id, seconds)
            prune_sessions(conn, token.id, SESSIONS_PER_TOKEN)

        db.transaction(self.engine, store_it)
        return value

    def session_token(self, value: str | None) -> ApiToken | None:
        """The live token a session value was opened with, else None (unknown, expired, its
        token revoked, or not a session value at all: a token is not a session)."""
        if not value or not value.startswith(SESSION_PREFIX) or len(value) > 200:
            return None
        with self.engine.connect() as conn:
            return find_session(conn, hash_token(value))

    def close_session(self, value: str | None) -> None:
        if value and value.startswith(SESSION_PREFIX) and len(value) <= 200:
            db.transaction(self.engine, lambda conn: delete_session(conn, hash_token(value)))
