"""Which gate the production runtime reads, from its arguments and the environment, as the
CLI resolves it (``gate.cli.common``), with a token of production's own (issue 50.4;
docs/runtime-environment.md):

1. ``gate=`` (a ready ``gate.domain.Gate``): that one.
2. ``gate_url=`` or ``database_url=`` given (not both): that one. A service needs a token:
   ``token=``, else ``PROMPTGATE_RUNTIME_TOKEN``.
3. ``settings=`` given with a database URL of its own: that database.
4. ``PROMPTGATE_URL`` with a token (``token=`` or ``PROMPTGATE_RUNTIME_TOKEN``): the service.
   ``PROMPTGATE_TOKEN`` is never read here: it is the CLI's (a developer's or CI's submit or
   admin token), and production must not run on it by default.
5. ``PROMPTGATE_DATABASE_URL``: the database (also when ``PROMPTGATE_URL`` is set without a
   runtime token: the line logged says so).
6. Else the CLI's default, ``sqlite:///promptgate.db`` in the current folder, when that file
   exists; when it does not, a UsageError saying what to set (a runtime never creates an empty
   database to fail on with "no such table").

``Target.reason`` is the one line the runtime logs when it starts: which source, and why.
No URL in it carries a password. Imports nothing beyond the standard library and the settings:
``gate.runtime`` stays light."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gate.errors import UsageError
from gate.settings import DEFAULT_DATABASE_URL, Settings, misspelt_target

URL_ENV = "PROMPTGATE_URL"
RUNTIME_TOKEN_ENV = "PROMPTGATE_RUNTIME_TOKEN"
DATABASE_ENV = "PROMPTGATE_DATABASE_URL"
CLI_TOKEN_ENV = "PROMPTGATE_TOKEN"  # the CLI's: never read by the runtime
TOKEN_HOWTO = "a runtime token: promptgate token create NAME --scope runtime --prompts a,b"


@dataclass(frozen=True)
class Target:
    """The gate a runtime reads: ``kind`` "service" (``url``, ``token``), "database"
    (``url``) or "gate" (a ``Gate`` passed in); ``reason`` is the line logged."""

    kind: str
    url: str | None
    token: str | None
    reason: str


SECRET_KEYS = ("password", "passwd", "pwd", "secret", "token", "key", "credential")


def shown(url: str) -> str:
    """A URL fit for a log line: a password in it replaced by ***, in its user part or in its
    query (``?password=…``, which SQLAlchemy hands the driver as the password, and any option
    named like a secret or a token)."""
    parts = urlsplit(url)
    query = "&".join(_shown_option(option) for option in parts.query.split("&")) if parts.query else ""
    if parts.password is None and query == parts.query:
        return url
    shown_url = url.replace("?" + parts.query, "?" + query, 1)
    if parts.password is not None:  # the first netloc is the URL's own: it comes first after the scheme
        shown_url = shown_url.replace(parts.netloc, f"{parts.username or ''}:***@{parts.netloc.rpartition('@')[2]}", 1)
    return shown_url


def _shown_option(option: str) -> str:
    key, sep, _value = option.partition("=")
    return f"{key}=***" if sep and any(word in key.lower() for word in SECRET_KEYS) else option


def resolve_target(
    *,
    database_url: str | None,
    gate_url: str | None,
    token: str | None,
    gate: Any,
    settings: Settings | None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Target:
    """The gate to read (see the module docstring), or a UsageError in one line."""
    env = os.environ if env is None else env
    runtime_token = token or env.get(RUNTIME_TOKEN_ENV) or None
    token_from = "token=" if token else RUNTIME_TOKEN_ENV
    if gate is not None:
        return Target("gate", None, None, "the Gate passed as gate=")
    if gate_url and database_url:
        raise UsageError("PromptRuntime: give gate_url or database_url, not both")
    if gate_url:
        return _service(gate_url, runtime_token, f"gate_url= given; its token from {token_from}", "gate_url=")
    if database_url:
        return _database(database_url, "database_url= given", cwd)
    if settings is not None and settings.database_url != DEFAULT_DATABASE_URL:
        return _database(settings.database_url, "the settings= given name it", cwd)
    target = _from_environment(env, runtime_token, token_from, cwd or Path.cwd())
    return target if target.kind != "database" or target.url is None else _database(target.url, None, cwd, target)


def _database(url: str, why: str | None, cwd: Path | None, target: Target | None = None) -> Target:
    """The database at ``url``; a UsageError when it is an SQLite file that is not there (the
    driver would create an empty one, and the runtime fail on it with "no such table")."""
    missing = missing_sqlite_file(url, cwd or Path.cwd())
    if missing is not None:
        raise UsageError(
            f"PromptRuntime: the database {shown(url)} is no file ({missing}): a runtime reads a gate database "
            "that exists (promptgate creates one), and never creates an empty one"
        )
    return target or Target("database", url, None, f"the database {shown(url)} ({why})")


def missing_sqlite_file(url: str, cwd: Path) -> Path | None:
    """The file an ``sqlite:///PATH`` URL names when it does not exist (None: not such a URL,
    an in-memory database, or the file is there)."""
    scheme, sep, rest = url.partition(":///")
    path = rest.split("?", 1)[0]
    if not sep or scheme.split("+", 1)[0] != "sqlite" or path in ("", ":memory:"):
        return None
    found = Path(path) if Path(path).is_absolute() else cwd / path
    return None if found.exists() else found


def _service(url: str, token: str | None, why: str, where: str) -> Target:
    if not token:
        raise UsageError(
            f"the gate's service ({where} {shown(url)}) needs a token: token= or {RUNTIME_TOKEN_ENV} "
            f"({TOKEN_HOWTO}); {CLI_TOKEN_ENV}, the CLI's, is not used by production"
        )
    return Target("service", url, token, f"the gate's service {shown(url)} ({why})")


def _from_environment(env: Mapping[str, str], token: str | None, token_from: str, cwd: Path) -> Target:
    service_url = env.get(URL_ENV, "").strip()
    database_url = env.get(DATABASE_ENV, "").strip()
    if service_url and (token or not database_url):
        return _service(service_url, token, f"{URL_ENV}; its token from {token_from}", URL_ENV)
    if database_url:
        why = f"{DATABASE_ENV}"
        if service_url:  # set for the CLI, with no token of production's own
            why += (
                f"; {URL_ENV} is set but {RUNTIME_TOKEN_ENV} is not ({CLI_TOKEN_ENV} is the CLI's, never production's)"
            )
        return Target("database", database_url, None, f"the database {shown(database_url)} ({why})")
    typo = misspelt_target(env)
    if typo:
        raise UsageError(typo)
    default_file = cwd / DEFAULT_DATABASE_URL.removeprefix("sqlite:///")
    if not default_file.is_file():
        raise UsageError(
            f"no gate to read prompts from: set {URL_ENV} and {RUNTIME_TOKEN_ENV} (the gate's service; "
            f"{TOKEN_HOWTO}) or {DATABASE_ENV} (its database), or pass gate_url= and token=, or database_url=; "
            f"the default, {DEFAULT_DATABASE_URL}, is no file in {cwd}"
        )
    why = f"neither {URL_ENV} nor {DATABASE_ENV} is set: the default, a file in {cwd}"
    return Target("database", DEFAULT_DATABASE_URL, None, f"the database {DEFAULT_DATABASE_URL} ({why})")
