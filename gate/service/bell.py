"""The service's hold on the fleet's doorbell (``gate.store.wake``): ``promptgate serve``
takes the bell at start on a connection of its own and, after each submission commits,
rings it (lets go and takes it again), which wakes every idle worker process's probe that
waits for it: a submission through the service is picked up in milliseconds, not within a
probe interval. One thread and one kept connection per service process; nothing on SQLite.

Several replicas: the first holds the bell and the others try to take it every few
seconds; a submission to a replica without it is picked up by the workers' next probe, as
one made on the database directly is."""

from __future__ import annotations

import logging
import threading

from sqlalchemy.exc import DBAPIError

from gate.errors import first_line
from gate.store.wake import has_bell, let_go_of_bell, take_bell

log = logging.getLogger("promptgate.server")
RETAKE_SECONDS = 5.0  # without the bell (another replica holds it, or the database was away): try again this often
TAKE_BACK_SECONDS = 5.0  # after a ring, the woken probes pass the bell on in turn; then it is the service's again


class Bell:
    def __init__(self, engine):
        self.engine = engine
        self.wanted = threading.Event()
        self.stopping = threading.Event()
        self.held = threading.Event()  # for the tests and /metrics: the service holds the bell now
        self.rings = 0
        self.conn = None
        self.thread: threading.Thread | None = None

    def start(self) -> Bell:
        """Take the bell now (before the service answers: a worker that starts after it
        hears it from its first probe), then keep it on a thread of its own."""
        if has_bell(self.engine) and self.thread is None:
            try:
                if self._take(0.0):
                    self.held.set()
            except DBAPIError as exc:  # the thread takes it once the database answers
                log.warning("bell: %s", first_line(exc))
                self._drop()
            self.thread = threading.Thread(target=self._run, name="bell", daemon=True)
            self.thread.start()
        return self

    def ring(self) -> None:
        """After a submission committed: wake the idle workers (rings close together are one)."""
        self.wanted.set()

    def stop(self, timeout: float = 2.0) -> None:
        self.stopping.set()
        self.wanted.set()
        if self.thread is not None:
            self.thread.join(timeout)

    def _run(self) -> None:
        try:
            while not self.stopping.is_set():
                try:
                    self._beat()
                except DBAPIError as exc:  # the database away: connect again, take the bell again
                    log.warning("bell: %s", first_line(exc))
                    self._drop()
                    self.stopping.wait(1.0)
        finally:
            self._drop()

    def _beat(self) -> None:
        if not self.held.is_set() and self._take(0.0):
            self.held.set()
        if not self.wanted.wait(None if self.held.is_set() else RETAKE_SECONDS):
            return
        self.wanted.clear()
        if self.stopping.is_set() or not self.held.is_set():
            return
        self.held.clear()
        if let_go_of_bell(self._connection()):
            self.rings += 1
        if self._take(TAKE_BACK_SECONDS):
            self.held.set()

    def _take(self, wait_seconds: float) -> bool:
        return take_bell(self._connection(), wait_seconds)

    def _connection(self):
        if self.conn is None:
            self.conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        return self.conn

    def _drop(self) -> None:
        self.held.clear()
        if self.conn is not None:
            try:  # closing the session lets go of the bell
                self.conn.invalidate()
                self.conn.close()
            except Exception:  # noqa: S110 (it is gone either way)
                pass
            self.conn = None
