"""uvicorn's HTTP protocol (httptools) with a deadline on request headers.

uvicorn closes a keep-alive connection that stays idle between requests, but a
connection whose request headers never finish (a byte every few seconds, or nothing after
the connection is made) was kept for ever: enough of them exhaust the server's sockets
(slowloris). Here a connection's request must have sent all its headers within
``header_timeout`` seconds of its first byte (of the connection, for its first request):
otherwise the connection is closed. The body has its own deadline (``limits.BodyLimit``)."""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HEADER_TIMEOUT_SECONDS = 10.0


class HeaderDeadlineProtocol(HttpToolsProtocol):
    header_timeout: float = HEADER_TIMEOUT_SECONDS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.header_deadline: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.header_deadline is None:  # the next request on a kept-alive connection
            self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self.header_deadline = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        if self.header_deadline is not None:
            self.header_deadline.cancel()
            self.header_deadline = None

    def _headers_too_slow(self) -> None:
        self.header_deadline = None
        if not self.transport.is_closing():
            self.logger.info("closed a connection whose request headers took over %g s", self.header_timeout)
            self.transport.close()


def with_header_timeout(seconds: float) -> type[HeaderDeadlineProtocol]:
    """The protocol class to pass uvicorn as ``http=``, its deadline ``seconds``."""
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), {"header_timeout": float(seconds)})
