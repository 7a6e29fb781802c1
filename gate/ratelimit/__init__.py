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
  followed by ``@HOST`` (the ``host[:port]`` of the base URL of the prompt's declared
  provider, or of ``OPENAI_BASE_URL``; ``api.openai.com`` when neither is set):
  ``*@localhost:8000``.
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
* A call's token cost is estimated before it is sent: the characters of the rendered messages,
  of their tool calls' arguments and of the prompt's tools / 4, plus 4 per message, plus the
  larger of ``max_tokens`` and ``max_completion_tokens`` (else 16). A cost larger than the
  token bucket is clamped to its size.

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
A 429 where no limit is configured teaches one: the shared bucket ``HOST|MODEL|429`` (no rate
of its own, ``LEARNED_SIZE``), paused as the provider asked, which every process that met a
429 there in the last ``LEARNED_TTL`` seconds consults before each call. Without any limit
configured and before any 429 there is no database or Redis traffic at all. (The item the
429 answered spends no attempt: the executor's backpressure, ``workers.execute.results``.)

Modules
-------

``limits`` (the setting parsed, the buckets of a call, a call's token cost), ``buckets``
(``Bucket``, ``SqlBucket``, ``RedisBucket`` and its Lua scripts) and ``limiter``
(``AdaptiveConcurrency``, ``CallLimiter``); this package re-exports their names.
"""

from __future__ import annotations

from .buckets import (
    CACHE_TTL,
    ERROR_NAP,
    JITTER,
    MAX_BATCH,
    MAX_NAP,
    MIN_NAP,
    PAUSE_SCRIPT,
    TAKE_SCRIPT,
    Bucket,
    Grant,
    RedisBucket,
    SqlBucket,
    make_bucket,
)
from .limiter import (
    DEFAULT_PAUSE,
    LEARNED_SIZE,
    LEARNED_SUFFIX,
    LEARNED_TTL,
    THROTTLE_NOTICE,
    AdaptiveConcurrency,
    CallLimiter,
    Slot,
    Usage,
)
from .rules import (
    DEFAULT_COMPLETION_TOKENS,
    DEFAULT_HOST,
    KEY_LIMIT,
    OPTIONS,
    BucketSpec,
    Limit,
    Limits,
    bucket_key,
    endpoint_host,
    estimate_tokens,
    parse_limits,
)

__all__ = [
    # limits
    "DEFAULT_COMPLETION_TOKENS",
    "DEFAULT_HOST",
    "KEY_LIMIT",
    "OPTIONS",
    "BucketSpec",
    "Limit",
    "Limits",
    "bucket_key",
    "endpoint_host",
    "estimate_tokens",
    "parse_limits",
    # buckets
    "CACHE_TTL",
    "ERROR_NAP",
    "JITTER",
    "MAX_BATCH",
    "MAX_NAP",
    "MIN_NAP",
    "PAUSE_SCRIPT",
    "TAKE_SCRIPT",
    "Bucket",
    "Grant",
    "RedisBucket",
    "SqlBucket",
    "make_bucket",
    # the executor's limiter
    "DEFAULT_PAUSE",
    "LEARNED_SIZE",
    "LEARNED_SUFFIX",
    "LEARNED_TTL",
    "THROTTLE_NOTICE",
    "AdaptiveConcurrency",
    "CallLimiter",
    "Slot",
    "Usage",
]
