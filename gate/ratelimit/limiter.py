"""What the executor holds per process: ``AdaptiveConcurrency`` (calls in flight, halved
on a 429) and ``CallLimiter`` (a concurrency slot, then the budget of every bucket of the
prompt's model, per call; the counts it writes to ``rate_limit_usage``). A 429 pauses the
call's limits for every worker; where none is configured, it teaches one: the shared
bucket ``HOST|MODEL|429``, paused as the provider asks and consulted by each process that
met a 429 there in the last ``LEARNED_TTL`` seconds."""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from gate import db
from gate.errors import CallFailure, ModelCallError, first_line
from gate.store.ratelimits import add_rate_limit_usage

from .buckets import Bucket, make_bucket
from .rules import BucketSpec, Limits, bucket_key, endpoint_host, estimate_tokens

log = logging.getLogger("promptgate.ratelimit")

THROTTLE_NOTICE = 0.01  # a call that waited longer than this for its budget counts as throttled
DEFAULT_PAUSE = 1.0  # a 429 without Retry-After pauses its limits this long
LEARNED_SUFFIX = "429"  # the shared limit a 429 teaches, where none is configured: HOST|MODEL|429
LEARNED_SIZE = 1000.0  # its size and refill per second: no rate of its own, only the provider's pauses
LEARNED_TTL = 300.0  # seconds after its last 429 there that a process still consults it


class AdaptiveConcurrency:
    """A limit on calls in flight that adapts to 429s: multiplicative decrease (halved, once
    per round: calls already in flight when it was cut do not cut it again) and additive
    increase (+1 per round of successful calls), between ``minimum`` and ``maximum``."""

    def __init__(self, maximum: int, minimum: int = 1, decrease: float = 0.5):
        self.maximum = max(1, int(maximum))
        self.minimum = max(1, min(int(minimum), self.maximum))
        self.decrease = decrease
        self.limit = float(self.maximum)
        self.active = 0
        self.started = 0
        self.cut_at = 0
        self.cuts = 0
        self._cond = threading.Condition()

    @property
    def current(self) -> int:
        return max(self.minimum, int(self.limit))

    def acquire(self, stop: threading.Event | None = None) -> int | None:
        """Wait for a free slot; returns its ticket, or None when ``stop`` is set first."""
        with self._cond:
            while self.active >= self.current:
                if stop is not None and stop.is_set():
                    return None
                self._cond.wait(0.1)
            self.active += 1
            self.started += 1
            return self.started

    def release(self, ticket: int, outcome: str) -> None:
        """``outcome``: "ok" (a successful call), "rate_limited" (429) or anything else."""
        with self._cond:
            self.active -= 1
            if outcome == "rate_limited":
                if ticket > self.cut_at:
                    self.limit = max(float(self.minimum), self.limit * self.decrease)
                    self.cut_at = self.started
                    self.cuts += 1
            elif outcome == "ok":
                self.limit = min(float(self.maximum), self.limit + 1.0 / max(1.0, self.limit))
            self._cond.notify_all()


@dataclass
class Slot:
    """One model call's place: ``granted`` False means do not call (the worker is stopping)."""

    run_id: int
    granted: bool = False
    waited: float = 0.0
    rate_limited: bool = False
    retry_after: float | None = None
    failed_other: bool = False

    def failed(self, exc: BaseException) -> None:
        """Tell the limiter how the call failed (a ModelCallError of kind rate_limit is a 429)."""
        if isinstance(exc, ModelCallError) and exc.kind is CallFailure.RATE_LIMIT:
            self.rate_limited = True
            self.retry_after = exc.retry_after
        else:
            self.failed_other = True


@dataclass
class Usage:
    throttled: int = 0
    throttled_ms: int = 0
    rate_limited: int = 0

    def __bool__(self) -> bool:
        return bool(self.throttled or self.throttled_ms or self.rate_limited)


class CallLimiter:
    """What the executor holds: the shared buckets of its limits, its adaptive concurrency
    and its counters (per run, written to ``rate_limit_usage`` by ``flush``)."""

    def __init__(
        self, settings, engine, concurrency: int, stop: threading.Event | None = None, bucket: Bucket | None = None
    ):
        self.settings = settings
        self.limits = Limits.from_settings(settings)
        self.bucket = bucket if bucket is not None else (make_bucket(settings, engine) if self.limits else None)
        self.engine = engine
        self.learned: dict[str, float] = {}  # a learned limit's key -> when this process last met a 429 there
        self.adaptive = AdaptiveConcurrency(concurrency)
        self.stop = stop
        self._lock = threading.Lock()
        self._usage: dict[int, Usage] = defaultdict(Usage)
        self.totals = {"throttled": 0, "throttled_ms": 0, "rate_limited": 0, "paused": 0}

    def buckets(self, spec, base_url: str | None) -> list[BucketSpec]:
        """The buckets a call spends from: its configured limits; else, for a while after a
        429 there, the limit that 429 taught (``learned``)."""
        specs = self.limits.buckets_for(endpoint_host(base_url), spec.model) if self.limits else []
        if not specs:
            learned = self.learned_bucket(spec, base_url)
            at = self.learned.get(learned.key)
            specs = [learned] if at is not None and time.monotonic() - at < LEARNED_TTL else []
        for b in specs:
            # made with the first limit: configured (__init__) or learned (learned_bucket)
            assert self.bucket is not None
            if not self.bucket.is_configured(b.key):
                self.bucket.configure(b.key, b.capacity, b.refill_per_second)
        return specs

    @staticmethod
    def learned_bucket(spec, base_url: str | None) -> BucketSpec:
        """The shared limit a 429 teaches for a model at an endpoint with no limit configured:
        no rate of its own (``LEARNED_SIZE``), only the pauses the provider asks for, which
        every worker that met a 429 there in the last ``LEARNED_TTL`` seconds obeys."""
        key = bucket_key(endpoint_host(base_url), spec.model, LEARNED_SUFFIX)
        return BucketSpec(key, LEARNED_SIZE, LEARNED_SIZE, "requests")

    def _learn(self, spec, base_url: str | None) -> list[BucketSpec]:
        """A 429 where no limit is configured: from now on this process consults the shared
        limit it teaches (made at once: the database, or Redis, is reached only from now)."""
        learned = self.learned_bucket(spec, base_url)
        with self._lock:
            if self.bucket is None:
                self.bucket = make_bucket(self.settings, self.engine)
            self.learned[learned.key] = time.monotonic()
        if not self.bucket.is_configured(learned.key):
            self.bucket.configure(learned.key, learned.capacity, learned.refill_per_second)
        return [learned]

    @contextmanager
    def slot(self, spec, item, messages: Sequence[Mapping[str, Any]], base_url: str | None) -> Iterator[Slot]:
        """Hold a place for one call of ``messages`` (rendered) to ``base_url``: a concurrency
        slot, then the budget of every bucket of the prompt's model there. Report a failed
        call with ``slot.failed(exc)``."""
        slot = Slot(run_id=item.run_id)
        ticket = self.adaptive.acquire(self.stop)
        if ticket is None:
            yield slot
            return
        buckets: list[BucketSpec] = []
        try:
            buckets = self.buckets(spec, base_url)
            slot.granted = True
            for b in buckets:
                cost = 1.0 if b.unit == "requests" else float(estimate_tokens(spec, messages))
                # made with the first limit: configured (__init__) or learned (learned_bucket)
                assert self.bucket is not None
                grant = self.bucket.acquire(b.key, cost, stop=self.stop)
                slot.waited += grant.waited
                if not grant:
                    slot.granted = False
                    break
            try:
                yield slot
            except BaseException:
                slot.failed_other = True
                raise
        finally:
            if slot.rate_limited:
                configured = [b for b in buckets if not b.key.endswith(f"|{LEARNED_SUFFIX}")]
                self._pause(configured or self._learn(spec, base_url), slot.retry_after)
            ok = slot.granted and not slot.rate_limited and not slot.failed_other
            self.adaptive.release(ticket, "rate_limited" if slot.rate_limited else "ok" if ok else "other")
            self._count(slot)

    def _pause(self, buckets: list[BucketSpec], retry_after: float | None) -> None:
        seconds = retry_after if retry_after is not None and retry_after > 0 else DEFAULT_PAUSE
        for b in buckets:
            try:
                # made with the first limit: configured (__init__) or learned (learned_bucket)
                assert self.bucket is not None
                self.bucket.pause(b.key, seconds)
                with self._lock:
                    self.totals["paused"] += 1
            except Exception as exc:
                log.warning("could not pause rate limit %s: %s", b.key, first_line(exc))

    def _count(self, slot: Slot) -> None:
        throttled = slot.waited > THROTTLE_NOTICE
        if not throttled and not slot.rate_limited:
            return
        with self._lock:
            usage = self._usage[slot.run_id]
            if throttled:
                usage.throttled += 1
                usage.throttled_ms += round(slot.waited * 1000)
                self.totals["throttled"] += 1
                self.totals["throttled_ms"] += round(slot.waited * 1000)
            if slot.rate_limited:
                usage.rate_limited += 1
                self.totals["rate_limited"] += 1

    def flush(self, run_id: int | None = None) -> None:
        """Write the counts gathered so far (of one run, or all) to ``rate_limit_usage``;
        on a database error they stay for the next flush. (A second run of the increment
        after a COMMIT lost in flight that did commit counts twice: these are statistics.)"""
        with self._lock:
            ids = [run_id] if run_id is not None else list(self._usage)
            pending = {i: self._usage.pop(i) for i in ids if i in self._usage and self._usage[i]}
        for rid, usage in pending.items():

            def add(conn, rid=rid, usage=usage) -> None:
                add_rate_limit_usage(
                    conn,
                    rid,
                    throttled=usage.throttled,
                    throttled_ms=usage.throttled_ms,
                    rate_limited=usage.rate_limited,
                )

            try:
                db.transaction(self.engine, add)
            except Exception as exc:
                log.warning("could not record rate-limit counts of run %s: %s", rid, first_line(exc))
                with self._lock:
                    kept = self._usage[rid]
                    kept.throttled += usage.throttled
                    kept.throttled_ms += usage.throttled_ms
                    kept.rate_limited += usage.rate_limited

    def close(self) -> None:
        self.flush()
        if self.bucket is not None:
            self.bucket.close()
