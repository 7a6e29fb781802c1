"""One poller base for every role: ``poll()`` does one small step and returns the delay
before the next (0 after a full batch); the loop sleeps on its wake event with jitter,
and an error is logged and backed off, never fatal (a database that is busy or away, as
``gate.db.is_retryable`` tells, with a one-line warning).

Two things keep an idle fleet cheap and a busy one quick. The pollers of a process share
an ``Activity`` probe: while no update is open anywhere, one indexed query per
``idle_probe_interval`` (±25 %) answers for every role (3.3 queries/s at 0.3 s), and the
probe that first sees an open update wakes every poller of the process at once, so a new
submission is picked up within one interval (half of it on average). While work is open,
an empty poll waits ``poll_interval`` (0.05 s), growing to ``poll_max_interval``. And a
role that hands work on nudges the next role of its process (materialize → execute →
finalize → reconcile), so work flows without waiting out poll delays.

On MariaDB/MySQL the probe waits out its interval in its statement rather than in the
process, and whoever opens work knocks on the waiting probes (``gate.store.wake``): a
submission, on the database or through the service, is picked up in milliseconds.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from abc import ABC, abstractmethod

from sqlalchemy.exc import DBAPIError

from gate.db import KeptConnection, is_retryable
from gate.errors import first_line
from gate.settings import Settings
from gate.store.updates import any_open_update
from gate.store.wake import KNOCKED, WORK, can_knock, interrupt, probe_or_wait, session_of

log = logging.getLogger("promptgate.worker")
WAIT_MAX_SECONDS = 5.0  # the longest a probe waits for a knock: a process asked to stop drains within it


class Activity:
    """The shared "is any update open?" probe of one process, cached for ``interval`` s
    (``Settings.idle_probe_interval``)."""

    def __init__(self, engine, interval: float):
        self.engine = engine
        self.interval = interval
        self.lock = threading.Lock()
        self.knockable = can_knock(engine)  # MariaDB/MySQL: the probe waits for a knock (gate.store.wake)
        self.open = False
        self.opened = 0  # how many times the probe found work after finding none
        self.due_in = self._next_interval()
        # the first probe falls at a random moment of the first interval, so processes
        # started together (a deploy) do not probe in step; with the knock, at once: the
        # process listens from its start (its later probes drift apart all the same)
        self.checked_at = time.monotonic() - (self.due_in if self.knockable else random.uniform(0, self.interval))
        self.reader = KeptConnection(engine)  # what an idle fleet costs the server: one statement a probe
        self.watchers: list[threading.Event] = []
        self.probing = False  # a poller's probe is out (it may wait for a knock): the others wait for its word
        self.knocks = 0  # probes woken by a knock
        self.session: int | None = None  # the server's id of the reader's session (knockable)

    def watch(self, wake: threading.Event) -> None:
        """Set ``wake`` whenever the probe finds work after finding none."""
        self.watchers.append(wake)

    def has_work(self) -> bool:
        with self.lock:
            if self.probing or time.monotonic() - self.checked_at < self.due_in:
                return self.open
            self.probing, wait_for = True, min(self._next_interval(), WAIT_MAX_SECONDS)
        try:  # outside the lock: the probe may wait for a knock up to an interval
            found, again = self._probe(wait_for)
        except BaseException:
            with self.lock:
                self.probing, self.checked_at, self.due_in = False, time.monotonic(), self._next_interval()
            raise
        with self.lock:
            self.probing = False
            was_open, self.open = self.open, found
            self.checked_at = time.monotonic()
            self.due_in = 0.0 if again else self._next_interval()
            if self.open and not was_open:
                self.opened += 1
                for wake in self.watchers:
                    wake.set()
        return found

    def _next_interval(self) -> float:
        """The interval, ±25 % at random: processes started together drift apart, so a
        fleet's probes spread over the interval and a submission is seen by the first of
        them (pickup ~interval/(N+1) for N processes) at the same cost per process."""
        return self.interval * random.uniform(0.75, 1.25)

    def next_probe_in(self) -> float:
        """Seconds until the cached answer goes stale: an idle poller sleeps that long, so
        the pollers of a process probe once per interval between them."""
        with self.lock:
            if self.probing:  # another poller's probe is out: it wakes the watchers if it finds work
                return self.interval
            return max(0.005, self.checked_at + self.due_in - time.monotonic())

    def _probe(self, wait_for: float) -> tuple[bool, bool]:
        """(work open?, probe again at once?). Knockable: one statement that answers at once
        when work is open, else waits up to ``wait_for`` for a knock; knocked or timed out,
        the next probe follows at once: the wait was the interval."""
        if not self.knockable:
            return self.reader.run(any_open_update), False
        began = time.monotonic()
        if self.session is None:
            self.session = self.reader.run(session_of)
        try:
            heard = self.reader.run(lambda conn: probe_or_wait(conn, wait_for))
        except BaseException:
            self.session = None  # the reader's connection was dropped: a new one, a new id
            raise
        if heard == WORK:
            return True, False
        if heard == KNOCKED:
            self.knocks += 1
            return False, True
        # timed out: probe again at once, unless the server cut the wait short: then sleep
        # out the interval, never spin
        return False, time.monotonic() - began >= wait_for / 2

    def interrupt(self) -> None:
        """The process is asked to stop: end the probe waiting in its statement now (it
        would have waited out its interval, up to ``WAIT_MAX_SECONDS``). Best effort."""
        if not (self.knockable and self.probing and self.session is not None):
            return
        try:
            with self.engine.connect() as conn:
                interrupt(conn, self.session)
        except DBAPIError as exc:
            log.debug("interrupting the probe: %s", first_line(exc))

    def close(self) -> None:
        self.reader.close()

    def saw_work(self) -> None:
        """A poller found work: the probe need not ask again for a while."""
        with self.lock:
            self.open, self.checked_at = True, time.monotonic()


class Poller(ABC):
    """A role's loop over the gate database: ``engine`` and ``settings`` are all it reads of
    the gate (no role goes through the service)."""

    role = "poller"

    def __init__(self, engine, settings: Settings, stop: threading.Event, activity: Activity | None = None):
        self.engine = engine
        self.settings = settings
        self.stop = stop
        self.activity = activity
        self.wake = threading.Event()
        self.peers: dict[str, Poller] = {}
        self._idle = self.settings.poll_interval
        self._opened_seen = 0
        if activity is not None:
            activity.watch(self.wake)

    def nudge(self, role: str) -> None:
        """Wake the ``role`` poller of this process now (it has work handed on to it)."""
        peer = self.peers.get(role)
        if peer is not None:
            peer.wake.set()

    @abstractmethod
    def poll(self) -> float:
        """One small step; returns the delay before the next."""

    def idle(self) -> float:
        """The delay after an empty poll: it grows from poll_interval to poll_max_interval,
        and starts from poll_interval again when new work has opened since (the work this
        role waits for, e.g. another process's first page, tends to follow soon)."""
        if self.activity is not None and self.activity.opened != self._opened_seen:
            self._opened_seen, self._idle = self.activity.opened, self.settings.poll_interval
        delay = self._idle
        self._idle = min(self._idle * 1.5, self.settings.poll_max_interval)
        return delay

    def busy(self) -> float:
        self._idle = self.settings.poll_interval
        if self.activity is not None:
            self.activity.saw_work()
        return 0.0

    def warm_up(self) -> None:
        """One poll before the loop starts, whatever the activity probe says: the first
        use of each statement compiles it (SQLAlchemy caches the compiled form per
        engine), and with every role compiling at once when the first submission wakes
        them, its pickup was slower than the next one's (bench/README.md)."""
        try:
            delay = self.poll()
        except Exception as exc:  # the loop retries and logs; startup must not fail on it
            log.debug("%s: warm-up poll failed: %s", self.role, exc)
            delay = 0.0
        if delay == 0.0:
            self.wake.set()  # it found work: the loop goes on at once

    def oldest_call_age(self) -> float | None:
        """Seconds since this poller's oldest model call in flight began (None: none)."""
        return None

    def close(self) -> None:  # noqa: B027 (a poller that holds nothing releases nothing)
        """Release what this poller holds; called once after the loop ends."""

    def run(self) -> None:
        backoff = 0.2
        try:
            while not self.stop.is_set():
                jitter = True
                try:
                    if self.activity is not None and not self.activity.has_work():
                        delay, jitter = self.activity.next_probe_in(), False
                    else:
                        self.wake.clear()  # this poll answers every wake so far (its own probe's too)
                        delay = self.poll()
                    backoff = 0.2
                except Exception as exc:  # the loop keeps running: log, back off, poll again
                    if is_retryable(exc):  # the same predicate as db.transaction's retries
                        log.warning("%s: database error, retrying in %.1fs: %s", self.role, backoff, first_line(exc))
                    else:
                        log.exception("%s: unexpected error; backing off", self.role)
                    delay, backoff = backoff, min(backoff * 2, 5.0)
                if delay > 0 and not self.stop.is_set():
                    self.wake.wait(delay * random.uniform(0.8, 1.2) if jitter else delay)
                self.wake.clear()
        finally:
            try:
                self.close()
            except Exception:
                log.exception("%s: error while releasing work", self.role)
