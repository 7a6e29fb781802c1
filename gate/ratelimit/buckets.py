"""Token-bucket stores shared by every worker: ``SqlBucket`` (rows of the gate database,
spent by ``gate.store.take_rate_tokens``) and ``RedisBucket`` (hashes spent by a Lua
script), behind ``Bucket``'s waiting, local queueing and batching (``Bucket.acquire``)."""

from __future__ import annotations

import hashlib
import logging
import random
import threading
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from gate import db
from gate.errors import UsageError, first_line
from gate.store.ratelimits import ensure_rate_bucket, pause_rate_bucket, rate_bucket_state, take_rate_tokens

log = logging.getLogger("promptgate.ratelimit")

MIN_NAP = 0.001  # shortest sleep between two tries of one waiter (seconds)
MAX_NAP = 1.0  # longest: a waiter re-asks at least this often (and notices stop)
JITTER = 0.1  # a nap is stretched by up to this fraction, so waiters do not wake as one
ERROR_NAP = 0.5  # after a backend error (database restarting, Redis unreachable)
MAX_BATCH = 16  # calls one shared write may take tokens for (threads queued in one process)
CACHE_TTL = 1.0  # tokens taken for a queue and left unused this long are dropped


@dataclass(frozen=True)
class Grant:
    """What ``acquire`` returns: granted or not (timeout, stop), and the time it waited."""

    granted: bool
    waited: float = 0.0

    def __bool__(self) -> bool:
        return self.granted


class Bucket(ABC):
    """A token bucket store shared by every worker. ``configure`` a key once per process
    (size and refill rate), then ``acquire`` (or ``take``) and ``pause`` it."""

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

    def is_configured(self, key: str) -> bool:
        """Whether ``configure`` was called for ``key`` in this process."""
        return key in self._config

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

    @abstractmethod
    def pause(self, key: str, seconds: float) -> None:
        """No grants on ``key`` for ``seconds``, for every worker."""

    def acquire(
        self, key: str, cost: float = 1.0, timeout: float | None = None, stop: threading.Event | None = None
    ) -> Grant:
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
        except Exception as exc:  # backend unreachable: keep waiting, say so now and then
            if time.monotonic() - self._last_warning > 10:
                self._last_warning = time.monotonic()
                log.warning("rate limit %s (%s backend) unavailable, waiting: %s", key, self.backend, first_line(exc))
            return 0, ERROR_NAP

    @staticmethod
    def _nap_left(nap: float, deadline: float | None) -> float:
        if deadline is None:
            return nap
        return max(0.0, min(nap, deadline - time.monotonic()))

    @staticmethod
    def _given_up(deadline: float | None, stop: threading.Event | None) -> bool:
        return (stop is not None and stop.is_set()) or (deadline is not None and time.monotonic() >= deadline)

    def close(self) -> None:  # noqa: B027 (a bucket that holds nothing releases nothing)
        pass


class SqlBucket(Bucket):
    """Buckets as rows of ``rate_limit_bucket`` in the gate database (MySQL/MariaDB or
    SQLite): one conditional UPDATE refills and spends (``gate.store.ratelimits``)."""

    backend = "sql"

    def __init__(self, engine) -> None:
        super().__init__()
        self.engine = engine
        self._ensured: set[str] = set()

    def _transaction(self, work):
        """``db.transaction`` for a moment only (a deadlock, a dropped connection): a longer
        outage goes back to ``acquire``, which waits ERROR_NAP between tries and notices stop.
        A second run after a COMMIT lost in flight that did commit spends twice: the budget
        errs on the safe side."""
        return db.transaction(self.engine, work, give_up_after=MAX_NAP)

    def _ensure(self, key: str) -> None:
        if key not in self._ensured:
            self._transaction(lambda conn: ensure_rate_bucket(conn, key, *self.config(key)))
            self._ensured.add(key)

    def take(self, key: str, cost: float = 1.0, up_to: int = 1) -> tuple[int, float]:
        self._ensure(key)

        def spend(conn):
            granted = take_rate_tokens(conn, key, cost, up_to)
            return granted, None if granted else rate_bucket_state(conn, key)

        granted, state = self._transaction(spend)
        if granted:
            return granted, 0.0
        if state is None:  # the row went away (a reset database): create it again
            self._ensured.discard(key)
            return 0, MIN_NAP
        return 0, max(MIN_NAP, state.wait_for(cost))  # refused: never 0, which means granted

    def pause(self, key: str, seconds: float) -> None:
        self._ensure(key)
        self._transaction(lambda conn: pause_rate_bucket(conn, key, seconds))

    def state(self, key: str):
        with self.engine.connect() as conn:
            return rate_bucket_state(conn, key)


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
            raise UsageError(
                "PROMPTGATE_RATE_LIMIT_BACKEND=redis needs the redis client: pip install 'prompt-gate[redis]'"
            ) from None
        self._no_script = redis.exceptions.NoScriptError
        self.client = client if client is not None else redis.Redis.from_url(url or "redis://127.0.0.1:6379/0")
        self.prefix = prefix
        self._shas = {TAKE_SCRIPT: _sha1(TAKE_SCRIPT), PAUSE_SCRIPT: _sha1(PAUSE_SCRIPT)}

    def _run(self, script: str, key: str, *args: Any) -> Any:
        keys = [self.prefix + key]
        try:
            return self.client.evalsha(self._shas[script], len(keys), *keys, *args)
        except self._no_script:  # not cached yet (or flushed, or a restarted server)
            self._shas[script] = self.client.script_load(script)
            return self.client.evalsha(self._shas[script], len(keys), *keys, *args)

    def _ttl_ms(self, key: str) -> int:
        capacity, rate = self.config(key)
        if rate <= 0:
            return 0  # a budget that never refills must not expire into a full one
        return int(max(60.0, 2 * capacity / rate) * 1000)

    def take(self, key: str, cost: float = 1.0, up_to: int = 1) -> tuple[int, float]:
        capacity, rate = self.config(key)
        granted, wait = self._run(
            TAKE_SCRIPT, key, repr(capacity), repr(rate), repr(float(cost)), self._ttl_ms(key), max(1, int(up_to))
        )
        if int(granted) >= 1:
            return int(granted), 0.0
        return 0, max(MIN_NAP, float(wait))  # refused: never 0, which means granted

    def pause(self, key: str, seconds: float) -> None:
        self._run(PAUSE_SCRIPT, key, repr(float(seconds)), self._ttl_ms(key))

    def state(self, key: str) -> dict[str, str]:
        raw = self.client.hgetall(self.prefix + key)
        return {
            k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v for k, v in raw.items()
        }

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
