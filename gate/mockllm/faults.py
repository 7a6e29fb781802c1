"""The mock server's fault injection: which request gets latency, an error, a 429, a hang
or a garbage answer (seeded, so a test run is reproducible); and what one item's own text
asks of it (``ItemScript``): a delay, an HTTP status."""

from __future__ import annotations

import hashlib
import random
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass

from .policy import garbage_word


@dataclass(frozen=True)
class Fault:
    kind: str  # ok | garbage | error | timeout | rate_limited
    delay: float  # seconds of latency before answering


class FaultPlan:
    """Draws, under one lock, the latency and the fault of each request from a seeded RNG,
    and keeps the sliding one-minute window of the rate limit."""

    def __init__(
        self,
        *,
        latency_ms: float = 0.0,
        jitter_ms: float = 0.0,
        error_rate: float = 0.0,
        rate_limit_rpm: int = 0,
        timeout_rate: float = 0.0,
        garbage_rate: float = 0.0,
        rate_limit_rate: float = 0.0,
        retry_after_ms: float = 1000.0,
        seed: int = 0,
    ):
        rates = {
            "error_rate": error_rate,
            "timeout_rate": timeout_rate,
            "garbage_rate": garbage_rate,
            "rate_limit_rate": rate_limit_rate,
        }
        for name, rate in rates.items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {rate}")
        if sum(rates.values()) > 1.0:
            raise ValueError("error_rate + timeout_rate + garbage_rate + rate_limit_rate must not exceed 1")
        if latency_ms < 0 or jitter_ms < 0 or rate_limit_rpm < 0 or retry_after_ms < 0:
            raise ValueError("latency_ms, jitter_ms, rate_limit_rpm and retry_after_ms must not be negative")
        self.latency_ms, self.jitter_ms = latency_ms, jitter_ms
        self.error_rate, self.timeout_rate, self.garbage_rate = error_rate, timeout_rate, garbage_rate
        self.rate_limit_rate, self.retry_after_ms = rate_limit_rate, retry_after_ms
        self.rate_limit_rpm = int(rate_limit_rpm)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._window: deque[float] = deque()

    def rate_limited(self, now: float | None = None) -> float | None:
        """Seconds until a slot frees up when the limit is reached, else None (and the
        request takes a slot)."""
        if not self.rate_limit_rpm:
            return None
        now = time.monotonic() if now is None else now
        with self._lock:
            while self._window and self._window[0] <= now - 60.0:
                self._window.popleft()
            if len(self._window) >= self.rate_limit_rpm:
                return max(0.001, self._window[0] + 60.0 - now)
            self._window.append(now)
            return None

    def draw(self) -> Fault:
        with self._lock:
            jitter = self._rng.uniform(0, self.jitter_ms) if self.jitter_ms else 0.0
            roll = self._rng.random()
        delay = (self.latency_ms + jitter) / 1000.0
        if roll < self.timeout_rate:
            return Fault("timeout", delay)
        roll -= self.timeout_rate
        if roll < self.error_rate:
            return Fault("error", delay)
        roll -= self.error_rate
        if roll < self.garbage_rate:
            return Fault("garbage", delay)
        roll -= self.garbage_rate
        if roll < self.rate_limit_rate:  # a provider asking to wait answers at once
            return Fault("rate_limited", 0.0)
        return Fault("ok", delay)

    def pick(self, seq: Sequence[str]) -> str:
        with self._lock:
            return garbage_word(seq, self._rng)


DELAY_RE = re.compile(r"^[ \t]*delay_ms[ \t]*:[ \t]*([0-9]{1,7}(?:[ \t]*,[ \t]*[0-9]{1,7})*)[ \t]*$", re.MULTILINE)
STATUS_RE = re.compile(r"^[ \t]*status[ \t]*:[ \t]*([1-5][0-9][0-9])[ \t]*$", re.MULTILINE)


class ItemScript:
    """What an item's own user text asks of the server, so a test can single one item out:
    a line ``delay_ms: 20000,0`` delays the k-th request with that very text by the k-th
    value (the last one repeats), and ``status: 500`` answers every request of it with that
    HTTP status."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: Counter[str] = Counter()

    def delay(self, text: str) -> float | None:
        """Seconds this request waits before its answer, when the text scripts one."""
        found = DELAY_RE.search(text) if "delay_ms" in text else None
        if not found:
            return None
        delays = [int(v) for v in found.group(1).split(",")]
        digest = hashlib.sha256(text.encode()).hexdigest()
        with self._lock:
            n = self._seen[digest]
            self._seen[digest] += 1
        return delays[min(n, len(delays) - 1)] / 1000.0

    @staticmethod
    def status(text: str) -> int | None:
        found = STATUS_RE.search(text) if "status" in text else None
        return int(found.group(1)) if found else None
