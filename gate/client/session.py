"""``ServiceSession``: one client's connection to the gate's HTTP service (``gate.service``),
the one place a request is made and its answer judged; ``RemoteGate`` (``gate.client.remote``) is
the Gate's methods on top of it.

Every refusal becomes the GateError ``Gate`` raises, with the server's one line and exit
code (``gate.contract.http_status``: the one table the server answers by; 401 a GateError saying
why). An unreachable or silent server is one line too ("cannot reach the gate at URL:
..."), and so is an answer this client cannot decode. The token travels only in the
Authorization header: no message, log or error ever shows it."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from gate import __version__
from gate.contract.codec import decode as wire_decode
from gate.contract.http_status import error_class
from gate.errors import GateError, UsageError, first_line

from .transport import Timeouts, Transport, TransportError

TOKEN_RE = re.compile(r"[\x21-\x7e]{1,512}")
TIMEOUTS = Timeouts(connect=10.0, read=60.0)


def shown_url(url: str) -> str:
    """The URL fit for a message: any user:password part removed."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def check_gate_url(url: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"the gate URL {shown_url(url)[:120]!r} (--gate-url, PROMPTGATE_URL) is not an http:// or https:// URL"
        )
    return url.strip().rstrip("/")


def path_segment(name: Any) -> str:
    """A name as one path segment (a "/" in it cannot reach another route)."""
    return quote(str(name), safe="")


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return format(value, "f")
    raise TypeError(f"{type(value).__name__} is not JSON")


class Unreachable(GateError):
    """The service did not answer: refused, reset or timed out."""


def decode(cls, data):
    """``wire.decode``, but an answer that does not decode (a server of another version, a
    proxy's page) is one GateError line, never a traceback."""
    try:
        return wire_decode(cls, data)
    except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        raise GateError(
            f"the gate's answer cannot be read by this client ({type(exc).__name__}): is the "
            "service the same version as this CLI?"
        ) from None


class ServiceSession:
    """The gate's service at ``url``, called with bearer ``token`` (None: anonymous, what a
    server with --public-read allows for reads)."""

    def __init__(self, url: str, token: str | None = None):
        self.url = check_gate_url(url)
        headers = {"User-Agent": f"promptgate/{__version__}", "Accept": "application/json"}
        if token:
            if not TOKEN_RE.fullmatch(token.strip()):  # (never echoed: it may be a real token mangled)
                raise UsageError(
                    "PROMPTGATE_TOKEN is not a token: printable ASCII without spaces, as "
                    "`promptgate token create` prints it"
                )
            headers["Authorization"] = f"Bearer {token.strip()}"
        self.http = Transport(self.url, headers, TIMEOUTS)

    def close(self) -> None:
        self.http.close()

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: dict | None = None,
        body: Any = None,
        timeout: float | None = None,
        upload: tuple[Any, int] | None = None,
    ) -> Any:
        """The answer's JSON, or the GateError the server's answer stands for. ``upload``:
        (an open binary file, its size) streamed as the body instead of JSON."""
        content = None if body is None else json.dumps(body, default=_json_value, ensure_ascii=True).encode()
        headers = {"Content-Type": "application/json"} if body is not None else None
        if upload is not None:
            content, headers = upload[0], {"Content-Type": "application/octet-stream", "Content-Length": str(upload[1])}
        params = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self.http.request(method, path, params=params, content=content, headers=headers, timeout=timeout)
        except TransportError as exc:
            raise Unreachable(
                f"cannot reach the gate at {shown_url(self.url)}: {first_line(exc) or type(exc).__name__}"
            ) from None
        return self._answer(response)

    def _answer(self, response) -> Any:
        try:
            data = json.loads(response.content) if response.content else None
        except ValueError:
            data = None
        if response.status_code < 300 and data is not None:
            return data
        fields = data if isinstance(data, dict) else {}
        message = fields.get("error")
        if not isinstance(message, str) or not message:
            raise GateError(
                f"the gate at {shown_url(self.url)} answered HTTP {response.status_code} "
                f"{response.reason_phrase}".rstrip()
            )
        error = error_class(response.status_code)(first_line(message, 500))
        code = fields.get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool) and 0 < code < 256:
            error.exit_code = code
        raise error
