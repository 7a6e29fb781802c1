"""The status page's sign-in (issue 33.6) against a real `promptgate serve` on MariaDB: the
cookie holds a session, never the API token; a read or submit token signs in, an admin
token does not; a session ends at sign-out, at its expiry and when its token is revoked."""

from __future__ import annotations

from contextlib import contextmanager

import httpx2
from sqlalchemy import text

from gate.domain import Gate

COOKIE = "promptgate_session"


def cookie(value: str) -> dict:
    return {"Cookie": f"{COOKIE}={value}"}


@contextmanager
def signed_in(service, scope: str):
    """A browser signed in with the token of ``scope``, and its cookie's value."""
    with httpx2.Client(base_url=service.url, timeout=30, follow_redirects=False) as browser:
        answer = browser.post("/login", data={"token": service.tokens[scope]})
        assert answer.status_code == 303, answer.text
        (value,) = browser.cookies.values()  # the one cookie sign-in sets
        yield browser, value


def test_the_sign_in_cookie_is_a_session_never_the_token(service):
    """Review: the cookie held the raw token, so a stolen cookie was the API token itself,
    and the sign-in page took any token, admin included."""
    token = service.tokens["read"]
    with signed_in(service, "read") as (browser, session):
        assert session.startswith("pgs_") and token not in session and session != token
        assert list(browser.cookies) == [COOKIE]
        assert browser.get("/").status_code == 200
        with httpx2.Client(base_url=service.url, timeout=30) as thief:
            stolen = thief.get("/v1/updates", headers={"Authorization": f"Bearer {session}"})
            assert stolen.status_code == 401  # the cookie is no API token
            assert thief.get("/", headers=cookie(token)).status_code == 401  # nor is a token a session
            assert thief.get("/", headers=cookie(session)).status_code == 200  # a copy reads pages...
            assert browser.post("/logout").status_code == 303
            assert thief.get("/", headers=cookie(session)).status_code == 401  # ...until sign-out ends it

    with httpx2.Client(base_url=service.url, timeout=30, follow_redirects=False) as admin_browser:
        refused = admin_browser.post("/login", data={"token": service.tokens["admin"]})
        assert refused.status_code == 403 and "set-cookie" not in refused.headers
        assert "sign in with a read token" in refused.text
        assert "an admin token does not" in admin_browser.get("/login").text


def test_a_session_ends_with_its_tokens_revocation_and_its_expiry(service):
    with signed_in(service, "submit") as (browser, _), service.client("admin") as admin:  # submit reads pages too
        assert browser.get("/workers").status_code == 200
        name = next(t["name"] for t in admin.get("/v1/tokens").json() if t["scope"] == "submit")
        assert admin.post(f"/v1/tokens/{name}/revoke").status_code == 200
        ended = browser.get("/workers")
        assert ended.status_code == 401 and "sign in again" in ended.text

    with signed_in(service, "read") as (browser, session):
        gate = Gate.connect(service.db_url)
        try:
            with gate.engine.begin() as conn:  # twelve hours on
                conn.execute(text("UPDATE page_session SET expires_at = created_at"))
            assert gate.session_token(session) is None
        finally:
            gate.close()
        assert browser.get("/").status_code == 401
