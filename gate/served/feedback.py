"""Production's feedback, buffered and sent in batches by a background thread
(``FeedbackBuffer``): ``PromptRuntime.feedback`` only appends to a bounded queue.

A batch goes every ``flush_seconds`` or as soon as ``batch`` events wait, at most ``batch``
events a request. A batch the gate could not take for a passing reason (the service or the
database away) is put back at the head of the queue and sent again after a back-off, so a
short outage loses nothing; one it refused (a token that may not send feedback, an event it
does not accept) is dropped and counted (``refused``), said in the log. Beyond ``capacity``
events waiting, the oldest are dropped and counted (``dropped``): memory stays bounded
whatever the outage."""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable

log = logging.getLogger("gate.runtime")


class FeedbackBuffer:
    def __init__(
        self,
        sink: Callable[[list[dict]], object],
        retryable: Callable[[BaseException], bool],
        capacity: int = 100_000,
        batch: int = 500,
        flush_seconds: float = 0.2,
    ):
        self.sink, self.retryable = sink, retryable
        self.capacity, self.batch, self.flush_seconds = capacity, batch, flush_seconds
        self.queue: collections.deque[dict] = collections.deque()
        self.lock = threading.Lock()
        self.wake, self.stopping, self.idle = threading.Event(), threading.Event(), threading.Event()
        self.idle.set()
        self.sent = self.dropped = self.refused = 0
        self.draining = False  # flush(): send everything now, partial batches too
        self._thread: threading.Thread | None = None

    def add(self, event: dict) -> None:
        with self.lock:
            if len(self.queue) >= self.capacity:
                self.queue.popleft()
                self.dropped += 1
            self.queue.append(event)
            self.idle.clear()
            full = len(self.queue) >= self.batch
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="promptgate-feedback", daemon=True)
                self._thread.start()
        if full:
            self.wake.set()

    def pending(self) -> int:
        with self.lock:
            return len(self.queue)

    def flush(self, timeout: float = 10.0) -> bool:
        """Send what waits now; True when nothing is left within ``timeout`` seconds."""
        self.draining = True
        self.wake.set()
        return self.idle.wait(timeout)

    def stop(self, timeout: float = 10.0) -> bool:
        done = self.flush(timeout)
        self.stopping.set()
        self.wake.set()
        if self._thread is not None:
            self._thread.join(2.0)
        return done

    def _take(self) -> list[dict]:
        with self.lock:
            return [self.queue.popleft() for _ in range(min(self.batch, len(self.queue)))]

    def _put_back(self, events: list[dict]) -> None:
        with self.lock:
            room = self.capacity - len(self.queue)
            kept = events[: max(0, room)]
            self.dropped += len(events) - len(kept)
            self.queue.extendleft(reversed(kept))

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
            self.sent += len(events)
            return True
        except Exception as exc:
            if not self.retryable(exc):
                self.refused += len(events)
                log.warning("feedback refused by the gate, %d events dropped: %s", len(events), str(exc)[:300])
                return True
            self._put_back(events)
            log.warning("could not send feedback (%s); sending it again shortly", str(exc)[:200])
            return False
