"""One poller base for every role: ``poll()`` does one small step and returns the delay
before the next (0 after a full batch); the loop sleeps on the stop event with jitter,
and a database error is logged and backed off, never fatal."""

from __future__ import annotations

import logging
import random
import threading
from abc import ABC, abstractmethod

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from gate.service import Gate

log = logging.getLogger("promptgate.worker")
DB_ERRORS = (OperationalError, InterfaceError, DBAPIError)


class Poller(ABC):
    role = "poller"

    def __init__(self, gate: Gate, stop: threading.Event):
        self.gate = gate
        self.engine = gate.engine
        self.settings = gate.settings
        self.stop = stop
        self._idle = self.settings.poll_interval
        self.db_errors = 0

    @abstractmethod
    def poll(self) -> float:
        """One small step; returns the delay before the next."""

    def idle(self) -> float:
        """The delay after an empty poll: it grows from poll_interval to poll_max_interval."""
        delay = self._idle
        self._idle = min(self._idle * 1.5, self.settings.poll_max_interval)
        return delay

    def busy(self) -> float:
        self._idle = self.settings.poll_interval
        return 0.0

    def close(self) -> None:
        """Release what this poller holds; called once after the loop ends."""

    def run(self) -> None:
        backoff = 0.2
        try:
            while not self.stop.is_set():
                try:
                    delay = self.poll()
                    backoff = 0.2
                except DB_ERRORS as exc:
                    self.db_errors += 1
                    log.warning("%s: database error, retrying in %.1fs: %s", self.role, backoff,
                                str(exc).splitlines()[0][:200])
                    delay, backoff = backoff, min(backoff * 2, 5.0)
                except Exception:
                    log.exception("%s: unexpected error; backing off", self.role)
                    delay, backoff = backoff, min(backoff * 2, 5.0)
                if delay > 0:
                    self.stop.wait(delay * random.uniform(0.8, 1.2))
        finally:
            try:
                self.close()
            except Exception:
                log.exception("%s: error while releasing work", self.role)
