"""Production's feedback, buffered and sent in batches by a background thread
(``FeedbackBuffer``): ``PromptRuntime.feedback`` only appends to a bounded queue.

A batch goes every ``flush_seconds`` or as soon as ``batch`` events wait, at most ``batch``
events a request. A batch the gate could not take for a passing reason (the service or the
database away) is put back at the head of the queue and sent again after a back-off, so a
short outage loses nothing; one it refused (a token that may not send feedback, an event it
does not accept) is dropped and counted (``refused``), said in the log. Beyond ``capacity``
events waiting, the oldest are dropped and counted (``dropped``): memory stays bounded
whatever the outage; the log says so at the first drop, then every ``SAY_DROPS`` drops.

The end of the process (issue 46): the sending thread is a daemon, so it dies with the
interpreter. A buffer made with ``exit_timeout`` is registered (weakly: a buffer nobody holds
is not kept alive) with the one ``atexit`` hook of this module, ``flush_at_exit``, which
sends what waits in every registered buffer at once and waits at most the largest
``exit_timeout`` for all of them; ``stop()`` takes the buffer off. What a buffer could not
send by then (at exit or on ``stop()``) is counted (``unsent``) and logged as a WARNING on the
``gate.runtime`` logger: "N feedback events not sent: ...". The hook is all: no signal
handler is installed. A process killed by a signal it does not handle (SIGTERM's default,
SIGKILL) or ended by ``os._exit`` runs no atexit hook; its server's shutdown hook should
call ``PromptRuntime.close()`` (docs/production.md: "Feedback at shutdown").

``fork``: a child starts with every buffer empty (the parent's queued events stay the
parent's to send: sent by both, they would be sent twice), with a new lock, new events and
no thread (the parent's thread does not exist in the child; a lock another thread of the
parent held would never be released); its counters start at zero. The child's first event
starts its own thread, and its exit hook (inherited) sends what the child buffered."""

from __future__ import annotations

import atexit
import collections
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable

from .outage import Outage

log = logging.getLogger("gate.runtime")

_every: weakref.WeakSet[FeedbackBuffer] = weakref.WeakSet()  # reset in a forked child
_at_exit: weakref.WeakSet[FeedbackBuffer] = weakref.WeakSet()  # sent by flush_at_exit
SAY_DROPS = 10_000
_hooked = False  # flush_at_exit registered with atexit (once per process, on the first buffer)


class FeedbackBuffer:
    def __init__(
        self,
        sink: Callable[[list[dict]], object],
        retryable: Callable[[BaseException], bool],
        capacity: int = 100_000,
        batch: int = 500,
        flush_seconds: float = 0.2,
        exit_timeout: float | None = None,
    ):
        """``exit_timeout``: seconds the interpreter's exit waits for what this buffer holds
        to be sent (None: the exit does not wait; ``stop()`` is the only flush)."""
        self.sink, self.retryable = sink, retryable
        self.capacity, self.batch, self.flush_seconds = capacity, batch, flush_seconds
        self.exit_timeout = exit_timeout
        self._fresh(stopped=False)
        _every.add(self)
        if exit_timeout is not None:
            register_at_exit(self)

    def _fresh(self, stopped: bool) -> None:
        """The buffer's state: empty, no thread (at its making, and in a forked child)."""
        self.queue: collections.deque[dict] = collections.deque()
        self.lock = threading.Lock()
        self.outage = Outage("send feedback to the gate")  # one line while the gate is away, one when it is back
        self.wake, self.stopping, self.idle = threading.Event(), threading.Event(), threading.Event()
        self.idle.set()
        if stopped:
            self.stopping.set()
        self.sent = self.dropped = self.refused = 0
        self.in_flight = 0  # taken off the queue, not yet sent nor put back
        self.unsent = 0  # what was left when the buffer was stopped or the process exited
        self.last_error = ""
        self.draining = False  # flush(): send everything now, partial batches too
        self._thread: threading.Thread | None = None

    def add(self, event: dict) -> None:
        dropped = 0
        with self.lock:
            if len(self.queue) >= self.capacity:
                self.queue.popleft()
                self.dropped += 1
                dropped = self.dropped
            self.queue.append(event)
            self.idle.clear()
            full = len(self.queue) >= self.batch
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="promptgate-feedback", daemon=True)
                self._thread.start()
        if full:
            self.wake.set()
        if dropped % SAY_DROPS == 1:  # the first drop, then every SAY_DROPS
            log.warning(
                "feedback buffer full (%d events waiting): the oldest dropped, %d so far (last error sending: %s)",
                self.capacity,
                dropped,
                self.last_error or "none",
            )

    def pending(self) -> int:
        with self.lock:
            return len(self.queue)

    def flush(self, timeout: float = 10.0) -> bool:
        """Send what waits now; True when nothing is left within ``timeout`` seconds."""
        self.draining = True
        self.wake.set()
        return self.idle.wait(timeout)

    def stop(self, timeout: float = 10.0) -> bool:
        """Send what waits (within ``timeout`` seconds), then end the thread; what was not
        sent is counted (``unsent``) and logged. The exit hook no longer covers this buffer."""
        _at_exit.discard(self)
        return self.finish(time.monotonic() + timeout, f"within {timeout:g} s of close()", join=2.0)

    def finish(self, deadline: float, when: str, join: float | None = None) -> bool:
        """Send what waits until ``deadline`` (``time.monotonic()``), then end the thread
        (waiting ``join`` seconds for it; None: no longer than the deadline). True when all
        was sent; else the count left is ``unsent`` and the log says it, ``when``."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            done = self.flush(max(0.0, deadline - time.monotonic()))
        else:  # no thread to send it (never started, or gone): this one does, until the deadline
            done = self._send_here(deadline)
        self.stopping.set()
        self.wake.set()
        if thread is not None:
            thread.join(join if join is not None else max(0.0, deadline - time.monotonic()))
        with self.lock:
            self.unsent = 0 if done else len(self.queue) + self.in_flight
        if self.unsent:
            self._say_unsent(when)
        return done

    def _say_unsent(self, when: str) -> None:
        why = f"the gate did not take them {when}"
        if self.last_error:
            why += f" (last: {self.last_error})"
        more = ""
        if self.dropped or self.refused:
            more = f"; besides, {self.dropped} dropped earlier (the buffer full) and {self.refused} refused"
        log.warning("%d feedback events not sent: %s%s", self.unsent, why, more)

    def _send_here(self, deadline: float) -> bool:
        """Send on the calling thread, a batch at a time, while the deadline allows (a
        request already started runs to the transport's own timeout)."""
        while time.monotonic() < deadline:
            events = self._take()
            if not events:
                return True
            if not self._send(events):
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        return not self.pending() and not self.in_flight

    def _take(self) -> list[dict]:
        with self.lock:
            events = [self.queue.popleft() for _ in range(min(self.batch, len(self.queue)))]
            self.in_flight = len(events)
            return events

    def _put_back(self, events: list[dict]) -> None:
        with self.lock:
            room = self.capacity - len(self.queue)
            kept = events[: max(0, room)]
            self.dropped += len(events) - len(kept)
            self.queue.extendleft(reversed(kept))
            self.in_flight = 0

    def _done(self, sent: int = 0, refused: int = 0) -> None:
        with self.lock:
            self.sent += sent
            self.refused += refused
            self.in_flight = 0

    def _run(self) -> None:
        """Every ``flush_seconds`` (or at once when a batch is full, or flushed): send what
        waits, a batch a request; a partial batch waits for the next round unless flushed,
        so each request carries what ``flush_seconds`` gathered, not what one round trip did."""
        backoff = 0.2
        while not self.stopping.is_set():
            self.wake.wait(self.flush_seconds)
            self.wake.clear()
            while events := self._take():
                if not self._send(events):
                    if self.stopping.wait(backoff):
                        return
                    backoff = min(backoff * 2, 5.0)
                    continue
                backoff = 0.2
                if self.pending() < self.batch and not self.draining:
                    break
            with self.lock:
                if not self.queue:
                    self.idle.set()
                    self.draining = False

    def _send(self, events: list[dict]) -> bool:
        """One batch; False when it was put back to be sent again (the gate away)."""
        try:
            self.sink(events)
            self._done(sent=len(events))
            self.outage.worked("feedback")
            return True
        except Exception as exc:
            self.last_error = str(exc)[:200]
            if not self.retryable(exc):
                self._done(refused=len(events))
                log.warning("feedback refused by the gate, %d events dropped: %s", len(events), str(exc)[:300])
                return True
            self._put_back(events)
            self.outage.failed("feedback", exc, f"{self.pending()} events held, sent again when it answers")
            return False


def register_at_exit(buffer: FeedbackBuffer) -> None:
    """The interpreter's exit sends what ``buffer`` holds (``flush_at_exit``); held weakly."""
    global _hooked
    _at_exit.add(buffer)
    if not _hooked:
        _hooked = True
        atexit.register(flush_at_exit)


def flush_at_exit() -> None:
    """The atexit hook: every registered buffer sends what it holds, all at once, each for
    at most its ``exit_timeout`` (the whole exit waits at most the largest); what is left is
    counted and logged. Called again (or in a child that never buffered), it does nothing."""
    buffers = [b for b in list(_at_exit) if b.exit_timeout is not None]
    _at_exit.clear()
    begun = time.monotonic()
    for buffer in buffers:
        buffer.draining = True
        buffer.wake.set()
    for buffer in buffers:
        wait = float(buffer.exit_timeout or 0.0)
        try:
            buffer.finish(begun + wait, f"within {wait:g} s of this process's exit")
        except Exception:  # an exit hook must not stop the others
            log.warning("could not send the feedback buffered at exit", exc_info=True)


def _after_fork_in_child() -> None:
    for buffer in list(_every):
        buffer._fresh(stopped=buffer.stopping.is_set())  # a stopped (closed) buffer stays stopped


os.register_at_fork(after_in_child=_after_fork_in_child)
