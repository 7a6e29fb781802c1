"""What this process serves, told to the gate by a background thread (``ServedReporter``):
never on a call's path, so a report that fails never fails a call.

Every ``interval`` seconds (the runtime's ttl, at least ``MIN_INTERVAL``) it refreshes the
prompts this process holds whose cache is due (off the call's path, so calls seldom wait for
a refresh) and sends one batch: per prompt the version served, the stable one beside it
during a canary rollout, since when, and its interval. A prompt loaded for the first time
is told at once. So each prompt is reported at most once per interval, in one request for
all of them; a failure is logged (once per kind of failure, then every ``QUIET`` reports)
and the next interval tries again."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable

log = logging.getLogger("gate.runtime")


class Orphaned(Exception):
    """The runtime this reporter served has been collected."""


MIN_INTERVAL = 1.0
QUIET = 60

_every: weakref.WeakSet[ServedReporter] = weakref.WeakSet()  # reset in a forked child


def process_identity() -> tuple[str, str, int]:
    """(process id, host, pid): the id unique to this process's life."""
    host = socket.gethostname()[:191] or "unknown"
    pid = os.getpid()
    return f"{host[:40]}-{pid}-{uuid.uuid4().hex[:8]}", host, pid


class ServedReporter:
    """``rows()`` gives this process's report rows (``PromptRuntime.served_rows``),
    ``refresh()`` refreshes the prompts whose cache is due, ``sink(rows)`` sends them. The
    first two are held weakly: a runtime nobody holds any more is collected, and its
    reporter's thread ends."""

    def __init__(self, rows: Callable[[], list[dict]], refresh: Callable[[], None], sink, interval: float):
        self._rows, self._refresh, self.sink = weakref.WeakMethod(rows), weakref.WeakMethod(refresh), sink
        self.interval = max(MIN_INTERVAL, float(interval))
        self.wake, self.stopping = threading.Event(), threading.Event()
        self.sent, self.failed = 0, 0
        self._said: dict[str, int] = {}
        self._told: set[str] = set()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        _every.add(self)

    def after_fork_in_child(self) -> None:
        """A forked child's reporter: no thread (the parent's does not exist in the child), a
        lock of its own, nothing told yet (the child is another process: it reports itself)."""
        stopped = self.stopping.is_set()
        self.wake, self.stopping = threading.Event(), threading.Event()
        if stopped:
            self.stopping.set()
        self._thread, self._lock = None, threading.Lock()
        self._told, self._said = set(), {}
        self.sent = self.failed = 0

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="promptgate-served", daemon=True)
                self._thread.start()

    def first_load(self, name: str) -> None:
        """A prompt loaded for the first time: told at once, not an interval later."""
        if name not in self._told:
            self.start()
            self.wake.set()

    def stop(self, timeout: float = 2.0) -> None:
        self.stopping.set()
        self.wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def rows(self) -> list[dict]:
        rows = self._rows()
        if rows is None:
            raise Orphaned
        return rows()

    def refresh(self) -> None:
        refresh = self._refresh()
        if refresh is None:
            raise Orphaned
        refresh()

    def _run(self) -> None:
        try:
            self._loop()
        except Orphaned:  # the runtime is gone: so is this thread
            return

    def _loop(self) -> None:
        due = time.monotonic()
        while not self.stopping.is_set():
            self.wake.wait(max(0.0, due - time.monotonic()))
            if self.stopping.is_set():
                return
            early = time.monotonic() < due
            self.wake.clear()
            if not early:
                self._safely(self.refresh, "refresh")
                due = time.monotonic() + self.interval
            rows = self._safely(self.rows, "report") or []
            if early:  # woken by a first load: only the prompts never told
                rows = [r for r in rows if r["prompt"] not in self._told]
            if rows and self._safely(lambda: self.sink(rows), "report") is not None:
                self._told.update(r["prompt"] for r in rows)
                self.sent += 1

    def _safely(self, fn, what: str):
        try:
            result = fn()
            return True if result is None else result
        except Orphaned:
            raise
        except Exception as exc:  # the call path never sees it; said once per kind, then every QUIET
            self.failed += 1
            kind = f"{what}:{type(exc).__name__}"
            said = self._said.get(kind, 0)
            if said % QUIET == 0:
                log.warning("could not %s what this process serves (%s): %s", what, type(exc).__name__, str(exc)[:300])
            self._said[kind] = said + 1
            return None


def _after_fork_in_child() -> None:
    for reporter in list(_every):
        reporter.after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
