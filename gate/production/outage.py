"""One log line when the gate stops answering a runtime, one when it answers again: not a
traceback per prompt per refresh (a gate down for 15 s wrote six of them, issue 50).

``Outage`` holds what is failing now (a prompt's refresh, or "feedback"); the first failure
while nothing else fails says so, with the error's first line and what keeps serving; the
success that leaves nothing failing says how long it lasted and how many tries failed. The
failures between are counted, not logged (at DEBUG only)."""

from __future__ import annotations

import logging
import threading
import time

from gate.errors import first_line

log = logging.getLogger("gate.runtime")


class Outage:
    """The failures of one kind of call to the gate (``what``: "refresh prompts from the
    gate", "send feedback to the gate")."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.failing: set[str] = set()
        self.since: float | None = None
        self.failures = 0
        self._lock = threading.Lock()

    def failed(self, key: str, exc: BaseException, serving: str) -> None:
        """A try for ``key`` failed with ``exc``; ``serving`` says what goes on meanwhile."""
        with self._lock:
            first = self.since is None
            self.failing.add(key)
            self.failures += 1
            if first:
                self.since = time.monotonic()
        if first:
            log.warning(
                "cannot %s (%s): %s; said once, until it answers again",
                self.what,
                first_line(exc, 300),
                serving,
            )
        else:
            log.debug("cannot %s (%s: %s)", self.what, key, first_line(exc, 300))

    def worked(self, key: str) -> None:
        """A try for ``key`` worked: the outage ends when nothing else is failing."""
        if self.since is None:  # the usual case: nothing to say, no lock taken
            return
        with self._lock:
            self.failing.discard(key)
            if self.failing or self.since is None:
                return
            lasted, failures = time.monotonic() - self.since, self.failures
            self.since, self.failures = None, 0
        log.warning("the gate answers again (%s: %d tries failed in %.1f s)", self.what, failures, lasted)
