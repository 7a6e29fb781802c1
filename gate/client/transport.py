"""The CLI's HTTP transport to the gate's service, on the standard library (``http.client``).

Why not an HTTP client library: a `promptgate` command through the service is one or two
requests, and importing httpx2 and httpcore2 was 0.05-0.13 s of a ~0.3 s command
(bench/README.md, CLI start). What the CLI needs of HTTP is small and is all here:

* a request with a JSON or streamed body (an upload: a file object and its length), its
  answer read whole; redirects are never followed (an answer is the service's or an error);
* timeouts: ``connect`` for the TCP (and TLS) set-up, then ``read`` for each wait on the
  socket (a long-poll passes its own);
* TLS verified against the system's CA store (``ssl.create_default_context``, which honours
  ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``), or certifi's bundle when the system has none;
* proxies from the environment as curl and urllib read them (``https_proxy``,
  ``http_proxy``, ``all_proxy``, ``no_proxy``, either case): a plain-HTTP target is asked
  through the proxy by its absolute URL, an https:// one through a CONNECT tunnel; a
  proxy's ``user:password@`` becomes its Proxy-Authorization;
* keep-alive for reads: a GET may reuse the last connection (and is sent again once on a
  fresh one if the server had closed it while idle); a request that changes something
  always goes on a fresh connection, so a connection closed under it can never leave it
  unknown whether the change was sent twice.

Every failure to reach the service is ``TransportError`` with one line."""

from __future__ import annotations

import base64
import http.client
import os
import socket
import ssl
from dataclasses import dataclass
from typing import Any, BinaryIO
from urllib.parse import unquote, urlencode, urlsplit

PROXY_KEYS = ("https_proxy", "http_proxy", "all_proxy", "no_proxy")


class TransportError(Exception):
    """The service could not be reached or did not answer (refused, reset, timed out)."""


@dataclass(frozen=True)
class Timeouts:
    connect: float = 10.0
    read: float = 60.0


@dataclass
class Response:
    status_code: int
    reason_phrase: str
    content: bytes


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url`` (None: connect directly), read as
    ``urllib.request`` reads it. (Loaded only when a proxy variable is set.)"""
    if not any(k.lower() in PROXY_KEYS for k in os.environ):
        return None
    import urllib.request

    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    # typeshed omits proxy_bypass_environment (not in urllib.request's __all__; it is there since 3.0)
    if urllib.request.proxy_bypass_environment(parts.hostname or "", proxies):  # type: ignore[attr-defined]
        return None
    return proxies.get(parts.scheme) or proxies.get("all")


def tls_context() -> ssl.SSLContext:
    """The system's CA store (``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured by OpenSSL), or
    certifi's bundle on a system with none (a python.org build on macOS)."""
    context = ssl.create_default_context()
    if (
        not context.get_ca_certs()
        and not os.environ.get("SSL_CERT_DIR")
        and not os.path.isdir(ssl.get_default_verify_paths().capath or "")
    ):
        try:
            import certifi

            context.load_verify_locations(certifi.where())
        except ImportError:
            pass
    return context


class Transport:
    """Requests to one base URL (``scheme://host[:port][/prefix]``) with default headers."""

    def __init__(self, base_url: str, headers: dict[str, str], timeouts: Timeouts = Timeouts()):
        parts = urlsplit(base_url)
        self.scheme, self.host, self.port = parts.scheme, parts.hostname or "", parts.port
        self.prefix = parts.path.rstrip("/")
        self.headers = dict(headers)
        self.timeouts = timeouts
        self.proxy = proxy_for(base_url)
        self.proxy_auth = _proxy_auth(self.proxy)
        self._context: ssl.SSLContext | None = None
        self._kept: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self._kept is not None:
            self._kept.close()
            self._kept = None

    def forget(self) -> None:
        """Drop the kept connection without a word on it: after ``fork`` it is the parent's
        (a request of the child on it would mix the two processes' answers)."""
        self._kept = None

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        content: bytes | BinaryIO | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> Response:
        target = self.prefix + path + (("?" + urlencode(params)) if params else "")
        sent_headers = {**self.headers, **(headers or {})}
        if content is None and method in ("POST", "PUT", "PATCH"):
            sent_headers.setdefault("Content-Length", "0")
        reusable = method == "GET"
        try:
            if reusable and self._kept is not None:
                try:
                    return self._send(self._kept, method, target, content, sent_headers, timeout, keep=True)
                except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                    self.close()  # closed while idle: once more, on a fresh connection
            return self._send(self._connect(), method, target, content, sent_headers, timeout, keep=reusable)
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise TransportError(_why(exc)) from None

    def _send(
        self,
        conn: http.client.HTTPConnection,
        method: str,
        target: str,
        content,
        headers: dict[str, str],
        timeout: float | None,
        keep: bool,
    ) -> Response:
        if self.proxy and self.scheme == "http":  # an absolute URL, asked of the proxy
            target = f"http://{self._authority()}{target}"
            headers = {**headers, **self.proxy_auth}
        conn.request(method, target, body=content, headers=headers)
        if conn.sock is not None:
            conn.sock.settimeout(timeout if timeout is not None else self.timeouts.read)
        answer = conn.getresponse()
        data = answer.read()
        if keep and not answer.will_close:
            self._kept = conn
        else:
            conn.close()
            if self._kept is conn:
                self._kept = None
        return Response(answer.status, answer.reason, data)

    def _connect(self) -> http.client.HTTPConnection:
        timeout = self.timeouts.connect
        if not self.proxy:
            conn = (
                http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self._tls())
                if self.scheme == "https"
                else http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            )
            conn.connect()
            return conn
        proxy = _proxy_parts(self.proxy)
        if self.scheme == "https":
            conn = http.client.HTTPSConnection(
                proxy.hostname, proxy.port or _default_port(proxy.scheme), timeout=timeout, context=self._tls()
            )
            conn.set_tunnel(self.host, self.port or 443, headers=self.proxy_auth)
        else:
            port = proxy.port or _default_port(proxy.scheme)
            conn = (
                http.client.HTTPSConnection(proxy.hostname, port, timeout=timeout, context=self._tls())
                if proxy.scheme == "https"
                else http.client.HTTPConnection(proxy.hostname, port, timeout=timeout)
            )
        conn.connect()
        return conn

    def _tls(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = tls_context()
        return self._context

    def _authority(self) -> str:
        return self.host if self.port is None else f"{self.host}:{self.port}"


def _proxy_parts(proxy: str):
    return urlsplit(proxy if "://" in proxy else "http://" + proxy)


def _proxy_auth(proxy: str | None) -> dict[str, str]:
    """A proxy URL's ``user:password@`` as its Proxy-Authorization header."""
    parts = _proxy_parts(proxy) if proxy else None
    if parts is None or parts.username is None:
        return {}
    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
    return {"Proxy-Authorization": "Basic " + base64.b64encode(pair).decode()}


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def _why(exc: BaseException) -> str:
    """One line saying why the request failed (never the request's headers)."""
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted: {exc.verify_message}"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return text or type(exc).__name__
