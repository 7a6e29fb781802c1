"""A total deadline per source fetch (issue 48, finding 8): ``PROMPTGATE_SOURCE_TIMEOUT``
bounds connecting and each read, so a server that sends one byte just inside it holds a
reader for as long as it likes (140 bytes at 0.12 s held ``dataset add`` 34 s with a 2 s
timeout). ``PROMPTGATE_SOURCE_DEADLINE`` (seconds, default 60) bounds one fetch as a whole:
from the request to the body's last byte, redirects and headers included.

The connections a fetch opens register their socket with its ``FetchDeadline`` (the
connection classes here, used by the readers' openers); when the deadline passes a timer
shuts the sockets down, which wakes a read blocked in the standard library at once, and the
reader turns what follows into one line naming the deadline."""

from __future__ import annotations

import http.client
import os
import socket
import threading
import urllib.request

from gate.errors import DatasetError

DEFAULT_DEADLINE = 60.0
ENV = "PROMPTGATE_SOURCE_DEADLINE"
_current = threading.local()


def source_deadline(extra: dict) -> float:
    """The total seconds one fetch may take: ``extra["deadline"]``, else the environment's."""
    raw = extra.get("deadline") or os.environ.get(ENV) or DEFAULT_DEADLINE
    try:
        seconds = float(raw)
    except (TypeError, ValueError):
        raise DatasetError(f"invalid {ENV} {str(raw)[:40]!r}: give seconds") from None
    if not seconds > 0:
        raise DatasetError(f"invalid {ENV} {str(raw)[:40]!r}: give seconds above 0")
    return seconds


class FetchDeadline:
    """One fetch's deadline: ``start`` before the request (connections opened meanwhile on this
    thread register), ``cancel`` once the body is read or dropped."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def start(self) -> FetchDeadline:
        _current.deadline = self
        self._timer.start()
        return self

    def opened(self) -> None:
        """The request is answered (headers read): later connections are not this fetch's."""
        if getattr(_current, "deadline", None) is self:
            _current.deadline = None

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            expired = self.expired
        if expired:
            _shut(sock)

    def cancel(self) -> None:
        self._timer.cancel()
        self.opened()
        with self._lock:
            self._sockets.clear()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)


def timed_read(read, deadline: FetchDeadline, broken):
    """``read`` that raises ``broken()`` once the deadline has passed (the timer shut the
    socket: what a read got after it is no end of file)."""

    def timed(n: int) -> bytes:
        try:
            data = read(n)
        except Exception:
            if deadline.expired:
                raise broken() from None
            raise
        if deadline.expired:
            raise broken()
        return data

    return timed


def _shut(sock: socket.socket) -> None:
    try:  # the plain socket's shutdown: an SSLSocket's own would drop its state under a reader
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except (OSError, ValueError):
        pass


def _register(connection) -> None:
    deadline = getattr(_current, "deadline", None)
    if deadline is not None and connection.sock is not None:
        deadline.add(connection.sock)


class DeadlineHTTPConnection(http.client.HTTPConnection):
    def connect(self):
        super().connect()
        _register(self)


class DeadlineHTTPSConnection(http.client.HTTPSConnection):
    def connect(self):
        super().connect()
        _register(self)


class _HTTP(urllib.request.HTTPHandler):
    def http_open(self, req):
        return self.do_open(DeadlineHTTPConnection, req)


class _HTTPS(urllib.request.HTTPSHandler):
    def https_open(self, req):
        # HTTPSHandler.__init__ sets _context (its SSL context); typeshed does not declare it
        return self.do_open(DeadlineHTTPSConnection, req, context=self._context)  # type: ignore[attr-defined]


def plain_opener() -> urllib.request.OpenerDirector:
    """``urlopen``'s opener (proxies from the environment, redirects) with deadline connections:
    the CLI on the database, which reads what its operator asks."""
    return urllib.request.build_opener(_HTTP(), _HTTPS())
