"""Who may call what: bearer tokens with nested scopes (``gate.domain.tokens``).

``require(scope)`` is the dependency each route declares. No token: 401; a token that is
not a live one (unknown, revoked, malformed): 401 with the same words whatever the
reason, so a guesser learns nothing; a live token of a smaller scope: 403. With
``public_read`` the read scope needs no token (an open status page).

Look-ups are cached for ``ttl`` seconds per token hash (a thousand long-polls from CI
must not cost a thousand queries); a revocation through this server clears the cache at
once, one made elsewhere (the CLI on the database) takes effect within ``ttl``."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from fastapi import Request

from gate.domain.tokens import hash_token, scope_allows, token_prompts
from gate.errors import DatabaseError
from gate.records import ApiToken

ANONYMOUS = "anonymous"


class AuthError(Exception):
    """Refused: ``status`` 401 or 403 and a message that helps the caller, not a guesser."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Caller:
    name: str
    scope: str | None  # None: anonymous (public read)
    prompts: frozenset[str] | None = None  # a runtime token's prompts (None: not one)

    def may_run(self, prompt: str) -> bool:
        """May this caller run ``prompt`` (a runtime token whose prompts include it)?"""
        return self.prompts is not None and prompt in self.prompts


class TokenCache:
    def __init__(self, gate, ttl: float = 5.0):
        self.gate, self.ttl = gate, ttl
        self.entries: dict[str, tuple[float, ApiToken | None]] = {}
        self.lock = threading.Lock()

    def lookup(self, token: str) -> ApiToken | None:
        key = hash_token(token)
        now = time.monotonic()
        with self.lock:
            hit = self.entries.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        try:
            found = self.gate.authenticate(token)
        except DatabaseError:  # before the caller is known, say nothing of the database's host or error
            raise AuthError(503, "the gate's database is unreachable; try again shortly") from None
        with self.lock:
            if len(self.entries) > 10_000:  # a flood of made-up tokens cannot grow it without bound
                self.entries.clear()
            self.entries[key] = (now + self.ttl, found)
        return found

    def session(self, value: str) -> ApiToken | None:
        """The live token a status-page session was opened with (``Gate.session_token``),
        cached as token look-ups are; a revocation through this server forgets it at once."""
        key = "session:" + hash_token(value)
        now = time.monotonic()
        with self.lock:
            hit = self.entries.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        try:
            found = self.gate.session_token(value)
        except DatabaseError:
            raise AuthError(503, "the gate's database is unreachable; try again shortly") from None
        with self.lock:
            if len(self.entries) > 10_000:
                self.entries.clear()
            self.entries[key] = (now + self.ttl, found)
        return found

    def forget(self, value: str) -> None:
        """Forget a session at once (signed out here)."""
        with self.lock:
            self.entries.pop("session:" + hash_token(value), None)

    def forget_all(self) -> None:
        with self.lock:
            self.entries.clear()


def bearer(request: Request) -> str | None:
    header = request.headers.get("authorization") or ""
    kind, _, value = header.partition(" ")
    return value.strip() if kind.lower() == "bearer" and value.strip() else None


def authorize(request: Request, needed: str, why: str = "this") -> Caller:
    """The caller of ``request`` if it may do what needs scope ``needed`` (``why``: what,
    for the refusal), else AuthError."""
    state = request.app.state
    token = bearer(request)
    if token is None:
        if needed == "read" and state.config.public_read:
            return Caller(ANONYMOUS, None)
        raise AuthError(401, "a bearer token is required (Authorization: Bearer TOKEN; `promptgate token create`)")
    found = state.tokens.lookup(token)
    if found is None:
        raise AuthError(401, "invalid token")
    if not scope_allows(found.scope, needed):
        raise AuthError(403, f"this token's scope ({found.scope}) does not allow {why}: it needs {needed}")
    request.state.caller_scope = found.scope  # what an error is told (shown_errors.shown)
    return Caller(found.name, found.scope, token_prompts(found))


def require(needed: str):
    """The route dependency: ``caller: Caller = Depends(require("submit"))``."""

    def dependency(request: Request) -> Caller:
        return authorize(request, needed)

    dependency.__name__ = f"require_{needed}"
    return dependency


# --- the status page: a browser sends a cookie, never an Authorization header -----------

PAGE_COOKIE = "promptgate_session"
PAGE_SCOPES = ("read", "submit")  # who signs in at /login: the pages only read; admin uses a read token there


def page_caller(request: Request) -> Caller:
    """The caller of a status page (read scope): the bearer header or the HttpOnly,
    SameSite=Strict cookie the page's /login sets, which holds a session (never the token:
    ``Gate.open_session``). Only the pages read the cookie: ``authorize`` (every JSON
    route) reads the header alone, so a cookie a browser sends on its own can never submit,
    cancel or administer anything (no CSRF), and a stolen one is no API token. With
    ``public_read``, a cookie that is no longer valid reads anonymously."""
    state = request.app.state
    header, cookie = bearer(request), request.cookies.get(PAGE_COOKIE) or None
    if header is not None:
        return authorize(request, "read")
    if cookie is None:
        return authorize(request, "read")  # anonymous when public, else 401
    found = state.tokens.session(cookie)
    if found is not None and found.scope in PAGE_SCOPES:
        return Caller(found.name, found.scope)
    if state.config.public_read:
        return Caller(ANONYMOUS, None)
    raise AuthError(401, "the session has ended (signed out, expired, or its token revoked): sign in again")
