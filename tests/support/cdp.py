"""Headless Chromium driven over the DevTools protocol through a pipe (``--remote-debugging-pipe``:
commands in on fd 3, answers out on fd 4, each a JSON message ended by a NUL byte), for the
browser tests that act on a page while it lives (open a <details>, then watch it): no
websocket client, no driver, only Debian's chromium (tests/conftest.py ``chromium``)."""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any


class Chromium:
    """One headless Chromium and one page in it (``open``), for ``evaluate``."""

    def __init__(self, path: str, profile: Path):
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def fds_3_and_4() -> None:  # in the child, before exec: the pipe's ends where Chromium reads them
            high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)  # out of the way of 3 and 4 first
            high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [
                path,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            preexec_fn=fds_3_and_4,
            close_fds=False,  # Python's own descriptors are close-on-exec: only fds 3 and 4 go through
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._ids = itertools.count(1)
        self._buffer = b""
        self.session: str | None = None

    def call(self, method: str, params: dict | None = None, *, session: bool = True, timeout: float = 30) -> dict:
        message: dict[str, Any] = {"id": next(self._ids), "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._next(deadline)
            if answer.get("id") == message["id"]:
                assert "error" not in answer, f"{method}: {answer['error']}"
                return answer.get("result", {})

    def _next(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0, "Chromium did not answer in time"
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 16)
                assert chunk, "Chromium closed its pipe"
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def open(self, url: str, before: str = "") -> None:
        """A new page at ``url``, ``before`` run in it ahead of the page's own scripts (the
        DevTools protocol's, which no Content-Security-Policy governs); returns once loaded."""
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)[
            "sessionId"
        ]
        self.call("Page.enable")
        if before:
            self.call("Page.addScriptToEvaluateOnNewDocument", {"source": before})
        self.call("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'", 30, "the page's load")

    def evaluate(self, expression: str) -> Any:
        found = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        assert "exceptionDetails" not in found, found["exceptionDetails"]
        return found["result"].get("value")

    def wait_for(self, expression: str, timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}")

    def close(self) -> None:
        try:
            self.call("Browser.close", session=False, timeout=5)
        except (AssertionError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
