"""The HTTP edge, before a route's own work: which Host names the service answers for,
ids inside their columns' ranges, and a bound on the long-polls one token holds open.

* **Hosts.** A browser sends whatever Host a page's name resolved to: a name an attacker
  controls, re-pointed at this server (DNS rebinding), reads a ``--public-read`` gate as
  if it were that attacker's site. ``AllowedHosts`` answers 400 to any Host not in the
  operator's list (``serve --allowed-host``), on every request, and to one that is not a
  single host name or address with an optional port (``request_host``: no userinfo, no
  path); ``/login``'s Origin check compares against the same list (``origin_allowed``).
* **Ids.** Ids are BIGINT (1..2**63-1), prompt versions INT: a number outside that range
  names nothing, so it is a 404 before any query (SQLite cannot even bind it).
* **Long-polls.** Each open wait holds a future, a socket and a slot in the shared
  watcher's query: ``WaitSlots`` caps them per token (429 with Retry-After beyond it)."""

from __future__ import annotations

import ipaddress
import json
import re
from collections import Counter
from contextlib import contextmanager
from typing import TypeVar
from urllib.parse import urlsplit

from fastapi import Path

from gate.errors import NotFound

MAX_ID = 2**63 - 1  # BIGINT
MAX_VERSION = 2**31 - 1  # a prompt's version: INT
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
DEFAULT_MAX_WAITS = 100
RETRY_AFTER_SECONDS = 5


class EdgeRefusal(Exception):
    """A request refused at the edge: ``status``, one line, and headers to send."""

    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.headers = status, headers


# --- ids ----------------------------------------------------------------------------------


IdOrNone = TypeVar("IdOrNone", bound=int | None)


def in_range(value: IdOrNone, what: str, high: int = MAX_ID, low: int = 1) -> IdOrNone:
    """``value`` if it can name a row (``low``..``high``), else NotFound ("unknown WHAT N")."""
    if value is not None and not low <= value <= high:
        raise NotFound(f"unknown {what} {value}"[:200])
    return value


def _range(low: int, high: int) -> dict:
    return {"minimum": low, "maximum": high}


def update_id_path(
    update_id: int = Path(
        description="an update's id (1..2^63-1; any other is a 404)", json_schema_extra=_range(1, MAX_ID)
    ),
) -> int:
    return in_range(update_id, "update")


# --- hosts ----------------------------------------------------------------------------------


def host_name(value: str) -> str:
    """The name part of a Host header or an authority (``[::1]:8080`` → ``::1``), lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value


def default_hosts(bound: str) -> tuple[str, ...]:
    """With no ``--allowed-host``: the loopback names and addresses, and the address the
    server is bound to when it is a specific one (not 0.0.0.0 or ::)."""
    hosts = list(LOOPBACK_HOSTS)
    try:
        specific = not ipaddress.ip_address(host_name(bound)).is_unspecified
    except ValueError:  # a name: the operator named it
        specific = bool(bound.strip())
    if specific:
        hosts.append(host_name(bound))
    return tuple(dict.fromkeys(hosts))


def parse_hosts(values) -> tuple[str, ...]:
    """Hosts from repeated options and comma- or space-separated lists, as names; the
    loopback names always (a rebinding attacker's page sends its own name as Host, never
    these, and local health checks keep working)."""
    found = []
    for value in values or ():
        found += [host_name(part) for part in value.replace(",", " ").split() if part.strip()]
    return tuple(dict.fromkeys([*found, *LOOPBACK_HOSTS])) if found else ()


_HOST_RE = re.compile(r"(?:\[(?P<ip6>[0-9a-f:.]{2,45})\]|(?P<name>[a-z0-9._-]{1,253}))(?::(?P<port>[0-9]{1,5}))?")


def request_host(value: str) -> str | None:
    """The name a Host header (or an Origin's authority) names, lower case (``[::1]:8080``
    → ``::1``); None for anything but a host name or address and an optional port: userinfo
    (``localhost:80@evil``: a reader that splits at the first ``:`` sees localhost, one
    that parses it as a URL sees evil), a path, spaces, an IPv6 address without brackets,
    a port out of range."""
    match = _HOST_RE.fullmatch(value.lower())
    if match is None or (match.group("port") is not None and not 0 < int(match.group("port")) < 65536):
        return None
    if match.group("ip6") is None:
        return match.group("name")
    try:
        return str(ipaddress.IPv6Address(match.group("ip6")))
    except ValueError:
        return None


def origin_allowed(origin: str, allowed: tuple[str, ...]) -> bool:
    """An Origin header naming one of the allowed hosts: scheme http or https and a host
    with an optional port, nothing else (no userinfo, no path)."""
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and origin == f"{parts.scheme}://{parts.netloc}"
        and request_host(parts.netloc) in allowed
    )


NOT_ANSWERED = "this server does not answer for that Host (serve --allowed-host)"
NOT_A_HOST = "the Host header must be one host name or address, with an optional port"


class AllowedHosts:
    """A pure ASGI middleware: 400 (one JSON line) for a request whose Host is not allowed,
    is not one host with an optional port (``request_host``), or comes twice."""

    def __init__(self, app, hosts: tuple[str, ...]):
        self.app, self.hosts = app, frozenset(hosts)

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        hosts = [value for key, value in scope.get("headers") or () if key == b"host"]
        name = request_host(hosts[0].decode("latin-1")) if len(hosts) == 1 else None
        if name is not None and name in self.hosts:
            return await self.app(scope, receive, send)
        why = NOT_ANSWERED if name is not None or not hosts else NOT_A_HOST
        body = json.dumps({"error": why, "exit_code": 2}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


# --- long-polls per token --------------------------------------------------------------------


class WaitSlots:
    """Slots per holder (a token's name): its open long-polls (``what`` names them in the
    refusal). Uploads have slots of their own (``limits.UploadSlots``)."""

    def __init__(self, per_token: int = DEFAULT_MAX_WAITS, what: str = "this token already holds {n} open waits"):
        self.per_token, self.what = per_token, what
        self.held: Counter[str | None] = Counter()

    @contextmanager
    def hold(self, token_name: str | None):
        """One long-poll's slot for ``token_name`` (None: the anonymous readers of --public-read, who
        share one, apart from any token), or EdgeRefusal 429 when it holds all."""
        if self.held[token_name] >= self.per_token:
            raise EdgeRefusal(
                429, f"{self.what.format(n=self.per_token)}: retry later", {"Retry-After": str(RETRY_AFTER_SECONDS)}
            )
        self.held[token_name] += 1
        try:
            yield
        finally:
            self.held[token_name] -= 1
            if self.held[token_name] <= 0:
                del self.held[token_name]
