"""One rate-limit budget for every worker: token buckets shared through the gate database
(default) or Redis, and the executor's adaptive concurrency.

Providers cap requests and tokens per minute, and every execute worker, on every machine
and for every open pull request, spends the same budget. A limiter that reads a counter,
compares in the application and then increments lets every worker through at "99 < 100".
Here the check and the spend are one atomic operation on the shared server: one
conditional UPDATE (``gate.store.take_rate_tokens``) or one Lua script (``RedisBucket``).

Limits (``PROMPTGATE_RATE_LIMITS``)
-----------------------------------

Entries separated by ``;``, each ``PATTERN=OPTION:VALUE,...``::

    PROMPTGATE_RATE_LIMITS='gpt-4o-mini=rpm:500,tpm:200000; gpt-4o*=rpm:100; *=rpm:1000'

* ``PATTERN`` is a model name or a glob (``fnmatch``: ``*``, ``?``, ``[..]``), optionally
  followed by ``@HOST`` (the ``host[:port]`` of the prompt's ``provider.base_url`` or of
  ``OPENAI_BASE_URL``; ``api.openai.com`` when neither is set): ``*@localhost:8000``.
  An exact name wins over globs; globs are tried in the order written; no match = no limit.
* Options: ``rpm`` (requests per minute), ``tpm`` (tokens per minute), either may be left
  out; ``burst`` (the request bucket's size, default one second's worth, at least 1) and
  ``tpm_burst`` (the token bucket's size, default one second's worth).
* Every model has its own buckets, whichever entry it matched (an entry is a rule, not a
  shared pool): ``HOST|MODEL|rpm`` and ``HOST|MODEL|tpm``. Every worker process spends
  from the same rows, so N workers together stay under the limit.
* The gate spends ``PROMPTGATE_RATE_LIMIT_HEADROOM`` (default 0.97) of each per-minute rate:
  a provider counts on its own clock and window, and the network jitters; running exactly
  at the cap turns that jitter into 429s.
* A call's token cost is estimated before it is sent: the rendered messages' characters / 4
  plus 4 per message, plus ``max_tokens`` (or ``max_completion_tokens``, else 16). A cost
  larger than the token bucket is clamped to its size.

Backends (``PROMPTGATE_RATE_LIMIT_BACKEND``)
--------------------------------------------

``sql`` (default): the ``rate_limit_bucket`` table of the gate database, MySQL/MariaDB or
SQLite; no extra service. ``redis``: ``PROMPTGATE_REDIS_URL``; needs the ``redis`` extra
(``pip install 'prompt-gate[redis]'``). The Lua scripts run with EVALSHA (SCRIPT LOAD when
the server answers NOSCRIPT), every key and number passed through KEYS/ARGV, so the server
caches exactly two scripts. Time is the server's (``UTC_TIMESTAMP(6)`` / ``TIME``) in both.

Waiting, pausing, adapting
--------------------------

``Bucket.acquire(key, cost, timeout)`` waits until the tokens are there (sleeping the time
the bucket says, with jitter; within a process one thread per bucket polls the shared
server and the others queue behind it), rather than failing. ``Bucket.pause(key, s)``
writes a pause into the shared bucket: a 429 with Retry-After stops that limit for every
worker, and the bucket refills from the end of the pause rather than in one burst.
``AdaptiveConcurrency`` bounds the calls in flight of one executor: halved on a 429 (once
per round of calls), plus one per round of successful calls, never above ``concurrency``.
Without any limit configured there is no database or Redis traffic at all; the executor
still adapts its concurrency to 429s.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import math
import random
import threading
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Mapping
from urllib.parse import urlsplit

from .errors import UsageError

log = logging.getLogger("promptgate.ratelimit")

DEFAULT_HOST = "api.openai.com"
DEFAULT_COMPLETION_TOKENS = 16
MIN_NAP = 0.001            # shortest sleep between two tries of one waiter (seconds)
MAX_NAP = 1.0              # longest: a waiter re-asks at least this often (and notices stop)
JITTER = 0.1               # a nap is stretched by up to this fraction, so waiters do not wake as one
ERROR_NAP = 0.5            # after a backend error (database restarting, Redis unreachable)
THROTTLE_NOTICE = 0.01     # a call that waited longer than this for its budget counts as throttled
DEFAULT_PAUSE = 1.0        # a 429 without Retry-After pauses its limits this long
KEY_LIMIT = 191            # bucket names fit an indexed VARCHAR(191)
MAX_BATCH = 16             # calls one shared write may take tokens for (threads queued in one process)
CACHE_TTL = 1.0            # tokens taken for a queue and left unused this long are dropped


# ----------------------------------------------------------------------------- limits

@dataclass(frozen=True)
class Limit:
    """One entry of PROMPTGATE_RATE_LIMITS."""
    pattern: str
    host: str | None = None
    rpm: float | None = None
    tpm: float | None = None
    burst: float | None = None
    tpm_burst: float | None = None

    def matches(self, host: str, model: str) -> bool:
        if self.host is not None and self.host.lower() != host.lower():
            return False
        return fnmatch.fnmatchcase(model, self.pattern)

    @property
    def exact(self) -> bool:
        return not any(c in self.pattern for c in "*?[")


@dataclass(frozen=True)
class BucketSpec:
    """A bucket one call spends from: its shared name, size and refill rate."""
    key: str
    capacity: float
    refill_per_second: float
    unit: str                  # "requests" or "tokens"


OPTIONS = ("rpm", "tpm", "burst", "tpm_burst")


def parse_limits(text: str | None) -> list[Limit]:
    """``PROMPTGATE_RATE_LIMITS`` as a list of limits; UsageError names the bad part."""
    limits = []
    for raw in (text or "").replace("\n", ";").split(";"):
        entry = raw.strip()
        if not entry:
            continue
        where = f"PROMPTGATE_RATE_LIMITS entry {entry!r}"
        if "=" not in entry:
            raise UsageError(f"{where}: expected MODEL=rpm:N,tpm:N (e.g. gpt-4o-mini=rpm:500,tpm:200000)")
        left, right = (part.strip() for part in entry.split("=", 1))
        pattern, _, host = left.partition("@")
        pattern, host = pattern.strip(), host.strip() or None
        if not pattern:
            raise UsageError(f"{where}: the model name (or * for every model) is missing")
        values: dict[str, float] = {}
        for option in filter(None, (o.strip() for o in right.split(","))):
            name, sep, value = (p.strip() for p in option.partition(":"))
            name = name.lower().replace("-", "_")
            if not sep or name not in OPTIONS:
                raise UsageError(f"{where}: unknown option {option!r}; use {', '.join(o + ':N' for o in OPTIONS)}")
            try:
                number = float(value)
            except ValueError:
                raise UsageError(f"{where}: {name} must be a number, got {value!r}") from None
            if not math.isfinite(number) or number <= 0:
                raise UsageError(f"{where}: {name} must be a positive number, got {value!r}")
            values[name] = number
        if "rpm" not in values and "tpm" not in values:
            raise UsageError(f"{where}: give rpm:N (requests per minute), tpm:N (tokens per minute) or both")
        if "burst" in values and "rpm" not in values or "tpm_burst" in values and "tpm" not in values:
            raise UsageError(f"{where}: burst goes with rpm and tpm_burst with tpm")
        limits.append(Limit(pattern, host, **values))
    return limits


class Limits:
    """The configured limits and the buckets a call to (host, model) spends from."""

    def __init__(self, limits: list[Limit], headroom: float = 0.97):
        if not 0 < headroom <= 1:
            raise UsageError(f"PROMPTGATE_RATE_LIMIT_HEADROOM must be in (0, 1], got {headroom}")
        self.limits = limits
        self.headroom = headroom
        self._cache: dict[tuple[str, str], list[BucketSpec]] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings) -> "Limits":
        return cls(parse_limits(settings.rate_limits), settings.rate_limit_headroom)

    def __bool__(self) -> bool:
        return bool(self.limits)

    def match(self, host: str, model: str) -> Limit | None:
        exact = [lim for lim in self.limits if lim.exact and lim.matches(host, model)]
        found = exact or [lim for lim in self.limits if not lim.exact and lim.matches(host, model)]
        return found[0] if found else None

    def buckets_for(self, host: str, model: str) -> list[BucketSpec]:
        with self._lock:
            cached = self._cache.get((host, model))
        if cached is not None:
            return cached
        limit = self.match(host, model)
        buckets = []
        if limit is not None:
            for unit, rate, burst, suffix in (("requests", limit.rpm, limit.burst, "rpm"),
                                              ("tokens", limit.tpm, limit.tpm_burst, "tpm")):
                if rate:
                    per_second = rate / 60.0
                    capacity = burst or max(1.0, math.ceil(per_second))
                    buckets.append(BucketSpec(bucket_key(host, model, suffix), float(capacity),
                                              per_second * self.headroom, unit))
        with self._lock:
            self._cache[(host, model)] = buckets
        return buckets


def bucket_key(host: str, model: str, suffix: str) -> str:
    key = f"{host.lower()}|{model}|{suffix}"
    if len(key) > KEY_LIMIT:
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        key = f"{key[:KEY_LIMIT - 38]}~{digest}|{suffix}"
    return key


def endpoint_host(spec) -> str:
    """host[:port] of the endpoint a prompt calls (its provider.base_url, OPENAI_BASE_URL,
    or the SDK's default)."""
    import os
    provider = getattr(spec, "provider", None)
    base_url = (provider.base_url if provider is not None and provider.base_url else None) \
        or os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        return DEFAULT_HOST
    return urlsplit(base_url).netloc or base_url


def estimate_tokens(spec, item: Mapping[str, Any]) -> int:
    """A call's token cost before it is sent (see the module docstring)."""
    from .llm import render_messages
    try:
        messages = render_messages(spec, item)
    except Exception:           # the call will fail the same way; cost it as its completion
        messages = []
    params = getattr(spec, "params", None) or {}
    completion = params.get("max_tokens") or params.get("max_completion_tokens") or DEFAULT_COMPLETION_TOKENS
    chars = sum(len(m.get("content") or "") for m in messages)
    return math.ceil(chars / 4) + 4 * len(messages) + int(completion)


# ----------------------------------------------------------------------------- buckets

@dataclass(frozen=True)
class Grant:
    """What ``acquire`` returns: granted or not (timeout, stop), and the time it waited."""
    granted: bool
    waited: float = 0.0

    def __bool__(self) -> bool:
        return self.granted


class Bucket(ABC):
    """A token bucket store shared by every worker. ``configure`` a key once per process
    (size and refill rate), then ``acquire``/``try_acquire`` and ``pause`` it."""

    backend = "?"

    def __init__(self) -> None:
        self._config: dict[str, tuple[float, float]] = {}
        self._queues: dict[str, threading.Lock] = defaultdict(threading.Lock)
        self._waiting: dict[str, int] = defaultdict(int)
        self._cache: dict[str, tuple[float, float]] = defaultdict(lambda: (0.0, 0.0))
        self._guard = threading.Lock()
        self._last_warning = 0.0

    def configure(self, key: str, capacity: float, refill_per_second: float) -> None:
        if capacity <= 0 or refill_per_second < 0:
            raise ValueError("a bucket needs capacity > 0 and refill_per_second >= 0")
        self._config[key] = (float(capacity), float(refill_per_second))

    def config(self, key: str) -> tuple[float, float]:
        try:
            return self._config[key]
        except KeyError:
            raise KeyError(f"bucket {key!r} is not configured in this process") from None

    @abstractmethod
    def take(self, key: str, cost: float = 1.0, up_to: int = 1) -> tuple[int, float]:
        """One atomic refill-and-spend of as many calls of ``cost`` tokens as the bucket
        holds, at most ``up_to``: (calls granted, 0.0), or when refused (0, the seconds,
        always > 0, until one call could be granted; ``inf``: never, it does not refill)."""

    def try_acquire(self, key: str, cost: float = 1.0) -> float:
        """One atomic refill-and-spend of one call: 0.0 when granted, else the wait (> 0)."""
        granted, wait = self.take(key, cost, 1)
        return 0.0 if granted else wait

    @abstractmethod
    def pause(self, key: str, seconds: float) -> None:
        """No grants on ``key`` for ``seconds``, for every worker."""

    def acquire(self, key: str, cost: float = 1.0, timeout: float | None = None,
                stop: threading.Event | None = None) -> Grant:
        """Wait until ``cost`` tokens are granted, ``timeout`` seconds pass or ``stop`` is
        set. Threads of one process queue for a key locally; the head of the queue asks the
        shared bucket and sleeps the time it says (with jitter) between refusals. The head
        takes what the bucket holds for the threads queued behind it too (up to MAX_BATCH
        calls, in the same one statement): one shared write serves several calls when the
        rate outruns the store's commit latency, and no call goes out without a token the
        shared bucket gave."""
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        capacity, _ = self.config(key)
        cost = min(float(cost), capacity)
        with self._guard:
            queue = self._queues[key]
            self._waiting[key] += 1
        try:
            while not queue.acquire(timeout=self._nap_left(MAX_NAP, deadline)):
                if self._given_up(deadline, stop):
                    return Grant(False, time.monotonic() - started)
            try:
                while True:
                    if self._spend_cached(key, cost):
                        return Grant(True, time.monotonic() - started)
                    batch = max(1, min(MAX_BATCH, self._waiting[key], int(capacity // cost)))
                    granted, wait = self._take(key, cost, batch)
                    if granted:
                        self._cache[key] = (self._cache[key][0] + cost * granted, time.monotonic())
                        continue
                    if self._given_up(deadline, stop):
                        return Grant(False, time.monotonic() - started)
                    nap = min(max(wait, MIN_NAP), MAX_NAP) * random.uniform(1.0, 1.0 + JITTER)
                    nap = self._nap_left(nap, deadline)
                    if stop is not None:
                        stop.wait(nap)
                    else:
                        time.sleep(nap)
            finally:
                queue.release()
        finally:
            with self._guard:
                self._waiting[key] -= 1

    def _spend_cached(self, key: str, cost: float) -> bool:
        """Spend from the tokens the head took for the queue (the queue lock is held). Tokens
        left over by waiters that gave up are dropped after CACHE_TTL, never hoarded."""
        amount, taken_at = self._cache[key]
        if amount <= 0:
            return False
        if time.monotonic() - taken_at > CACHE_TTL:
            self._cache[key] = (0.0, 0.0)
            return False
        if amount + 1e-9 < cost:
            return False
        self._cache[key] = (max(0.0, amount - cost), taken_at)
        return True

    def _take(self, key: str, cost: float, up_to: int) -> tuple[int, float]:
        try:
            return self.take(key, cost, up_to)
        except Exception as exc:     # backend unreachable: keep waiting, say so now and then
            if time.monotonic() - self._last_warning > 10:
                self._last_warning = time.monotonic()
                log.warning("rate limit %s (%s backend) unavailable, waiting: %s", key, self.backend,
                            str(exc).splitlines()[0][:200])
            return 0, ERROR_NAP

    @staticmethod
    def _nap_left(nap: float, deadline: float | None) -> float:
        if deadline is None:
            return nap
        return max(0.0, min(nap, deadline - time.monotonic()))

    @staticmethod
    def _given_up(deadline: float | None, stop: threading.Event | None) -> bool:
        return (stop is not None and stop.is_set()) or (deadline is not None and time.monotonic() >= deadline)

    def close(self) -> None:
        pass


class SqlBucket(Bucket):
    """Buckets as rows of ``rate_limit_bucket`` in the gate database (MySQL/MariaDB or
    SQLite): one conditional UPDATE refills and spends (gate.store, "rate limits")."""

    backend = "sql"

    def __init__(self, engine) -> None:
        super().__init__()
        self.engine = engine
        self._ensured: set[str] = set()

    def _ensure(self, key: str) -> None:
        if key not in self._ensured:
            from . import store
            with self.engine.begin() as conn:
                store.ensure_rate_bucket(conn, key, *self.config(key))
            self._ensured.add(key)

    def take(self, key: str, cost: float = 1.0, up_to: int = 1) -> tuple[int, float]:
        from . import store
        self._ensure(key)
        with self.engine.begin() as conn:
            granted = store.take_rate_tokens(conn, key, cost, up_to)
            if granted:
                return granted, 0.0
            state = store.rate_bucket_state(conn, key)
        if state is None:            # the row went away (a reset database): create it again
            self._ensured.discard(key)
            return 0, MIN_NAP
        return 0, max(MIN_NAP, state.wait_for(cost))   # refused: never 0, which means granted

    def pause(self, key: str, seconds: float) -> None:
        from . import store
        self._ensure(key)
        with self.engine.begin() as conn:
            store.pause_rate_bucket(conn, key, seconds)

    def state(self, key: str):
        from . import store
        with self.engine.connect() as conn:
            return store.rate_bucket_state(conn, key)


# Both scripts read the time from the Redis server, take every key from KEYS and every
# number from ARGV, and return floats as strings (Redis turns Lua numbers into integers).
TAKE_SCRIPT = """
if redis.replicate_commands then redis.replicate_commands() end
local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local ttl_ms = tonumber(ARGV[4])
local up_to = tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local s = redis.call('HMGET', key, 'tokens', 'ts', 'paused_until')
local tokens = tonumber(s[1])
local ts = tonumber(s[2])
local paused = tonumber(s[3]) or 0
if tokens == nil or ts == nil then
  tokens = capacity
  ts = now
end
if now < paused then
  return {0, string.format('%.6f', paused - now + math.max(0, cost - tokens) / math.max(rate, 1e-9))}
end
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
if tokens >= cost then
  local calls = math.min(math.floor(tokens / cost), up_to)
  redis.call('HSET', key, 'tokens', string.format('%.17g', tokens - calls * cost),
             'ts', string.format('%.6f', math.max(ts, now)))
  redis.call('HINCRBY', key, 'granted', calls)
  if ttl_ms > 0 then redis.call('PEXPIRE', key, ttl_ms) else redis.call('PERSIST', key) end
  return {calls, '0'}
end
if rate <= 0 then
  return {0, 'inf'}
end
return {0, string.format('%.6f', (cost - tokens) / rate)}
"""

PAUSE_SCRIPT = """
if redis.replicate_commands then redis.replicate_commands() end
local key = KEYS[1]
local seconds = tonumber(ARGV[1])
local ttl_ms = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local stop_until = now + seconds
local paused = tonumber(redis.call('HGET', key, 'paused_until')) or 0
if paused > stop_until then stop_until = paused end
local ts = tonumber(redis.call('HGET', key, 'ts')) or now
if ts > stop_until then stop_until = ts end
redis.call('HSET', key, 'paused_until', string.format('%.6f', stop_until), 'tokens', '0',
           'ts', string.format('%.6f', stop_until))
redis.call('HINCRBY', key, 'rate_limited', 1)
if ttl_ms > 0 then
  redis.call('PEXPIRE', key, ttl_ms + math.ceil((stop_until - now) * 1000))
end
return string.format('%.6f', stop_until - now)
"""


class RedisBucket(Bucket):
    """Buckets as Redis hashes (``promptgate:rl:<key>``), refilled and spent by one Lua
    script run with EVALSHA."""

    backend = "redis"
    PREFIX = "promptgate:rl:"

    def __init__(self, url: str | None = None, client=None, prefix: str = PREFIX) -> None:
        super().__init__()
        try:
            import redis
        except ImportError:
            raise UsageError("PROMPTGATE_RATE_LIMIT_BACKEND=redis needs the redis client: "
                             "pip install 'prompt-gate[redis]'") from None
        self._no_script = redis.exceptions.NoScriptError
        self.client = client if client is not None else redis.Redis.from_url(url or "redis://127.0.0.1:6379/0")
        self.prefix = prefix
        self._shas = {TAKE_SCRIPT: _sha1(TAKE_SCRIPT), PAUSE_SCRIPT: _sha1(PAUSE_SCRIPT)}

    def _run(self, script: str, key: str, *args: Any) -> Any:
        keys = [self.prefix + key]
        try:
            return self.client.evalsha(self._shas[script], len(keys), *keys, *args)
        except self._no_script:      # not cached yet (or flushed, or a restarted server)
            self._shas[script] = self.client.script_load(script)
            return self.client.evalsha(self._shas[script], len(keys), *keys, *args)

    def _ttl_ms(self, key: str) -> int:
        capacity, rate = self.config(key)
        if rate <= 0:
            return 0                  # a budget that never refills must not expire into a full one
        return int(max(60.0, 2 * capacity / rate) * 1000)

    def take(self, key: str, cost: float = 1.0, up_to: int = 1) -> tuple[int, float]:
        capacity, rate = self.config(key)
        granted, wait = self._run(TAKE_SCRIPT, key, repr(capacity), repr(rate), repr(float(cost)),
                                  self._ttl_ms(key), max(1, int(up_to)))
        if int(granted) >= 1:
            return int(granted), 0.0
        return 0, max(MIN_NAP, float(wait))          # refused: never 0, which means granted

    def pause(self, key: str, seconds: float) -> None:
        self._run(PAUSE_SCRIPT, key, repr(float(seconds)), self._ttl_ms(key))

    def state(self, key: str) -> dict[str, str]:
        raw = self.client.hgetall(self.prefix + key)
        return {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                for k, v in raw.items()}

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:
            pass


def _sha1(script: str) -> str:
    return hashlib.sha1(script.encode("utf-8")).hexdigest()


def make_bucket(settings, engine=None) -> Bucket:
    backend = (settings.rate_limit_backend or "sql").strip().lower()
    if backend == "sql":
        if engine is None:
            raise UsageError("the sql rate-limit backend needs the gate database")
        return SqlBucket(engine)
    if backend == "redis":
        return RedisBucket(settings.redis_url)
    raise UsageError(f"PROMPTGATE_RATE_LIMIT_BACKEND={settings.rate_limit_backend!r}: use sql or redis")


# ----------------------------------------------------------------------------- concurrency

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


# ----------------------------------------------------------------------------- the executor's limiter

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
        if getattr(exc, "kind", None) == "rate_limit":
            self.rate_limited = True
            self.retry_after = getattr(exc, "retry_after", None)
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

    def __init__(self, settings, engine, concurrency: int, stop: threading.Event | None = None,
                 bucket: Bucket | None = None):
        self.limits = Limits.from_settings(settings)
        self.bucket = bucket if bucket is not None else (make_bucket(settings, engine) if self.limits else None)
        self.engine = engine
        self.adaptive = AdaptiveConcurrency(concurrency)
        self.stop = stop
        self._lock = threading.Lock()
        self._usage: dict[int, Usage] = defaultdict(Usage)
        self.totals = {"throttled": 0, "throttled_ms": 0, "rate_limited": 0, "paused": 0}

    def buckets(self, spec) -> list[BucketSpec]:
        if not self.limits or self.bucket is None:
            return []
        specs = self.limits.buckets_for(endpoint_host(spec), spec.model)
        for b in specs:
            if b.key not in self.bucket._config:
                self.bucket.configure(b.key, b.capacity, b.refill_per_second)
        return specs

    @contextmanager
    def slot(self, spec, item) -> Iterator[Slot]:
        """Hold a place for one call: a concurrency slot, then the budget of every bucket of
        the prompt's model. Report a failed call with ``slot.failed(exc)``."""
        slot = Slot(run_id=item.run_id)
        ticket = self.adaptive.acquire(self.stop)
        if ticket is None:
            yield slot
            return
        buckets: list[BucketSpec] = []
        try:
            buckets = self.buckets(spec)
            slot.granted = True
            for b in buckets:
                cost = 1.0 if b.unit == "requests" else float(estimate_tokens(spec, item.input))
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
                self._pause(buckets, slot.retry_after)
            ok = slot.granted and not slot.rate_limited and not slot.failed_other
            self.adaptive.release(ticket, "rate_limited" if slot.rate_limited else "ok" if ok else "other")
            self._count(slot)

    def _pause(self, buckets: list[BucketSpec], retry_after: float | None) -> None:
        seconds = retry_after if retry_after is not None and retry_after > 0 else DEFAULT_PAUSE
        for b in buckets:
            try:
                self.bucket.pause(b.key, seconds)
                with self._lock:
                    self.totals["paused"] += 1
            except Exception as exc:
                log.warning("could not pause rate limit %s: %s", b.key, str(exc).splitlines()[0][:200])

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
        on a database error they stay for the next flush."""
        from . import store
        with self._lock:
            ids = [run_id] if run_id is not None else list(self._usage)
            pending = {i: self._usage.pop(i) for i in ids if i in self._usage and self._usage[i]}
        for rid, usage in pending.items():
            try:
                with self.engine.begin() as conn:
                    store.add_rate_limit_usage(conn, rid, throttled=usage.throttled, throttled_ms=usage.throttled_ms,
                                               rate_limited=usage.rate_limited)
            except Exception as exc:
                log.warning("could not record rate-limit counts of run %s: %s", rid, str(exc).splitlines()[0][:200])
                with self._lock:
                    kept = self._usage[rid]
                    kept.throttled += usage.throttled
                    kept.throttled_ms += usage.throttled_ms
                    kept.rate_limited += usage.rate_limited

    def close(self) -> None:
        self.flush()
        if self.bucket is not None:
            self.bucket.close()
