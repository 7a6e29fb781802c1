"""One rate-limit budget for all workers: the naive GET-compare-INCR limiter
overshoots under 8 concurrent clients, the atomic buckets (one conditional UPDATE on real
MariaDB and SQLite, one Lua script on a real redis-server) never do; a 429 pauses a limit
for everyone; a gate run against the local model server with a requests-per-minute cap
stays (nearly) free of 429s."""

from __future__ import annotations

import os
import threading
import time
from collections import deque

import pytest
from sqlalchemy import select, update
from support.helpers import rules_spec, write_rule_rows
from support.migrated import migrated

from gate.domain import Gate
from gate.errors import UsageError
from gate.mockllm import FaultPlan, MockLLMServer
from gate.ratelimit import TAKE_SCRIPT, AdaptiveConcurrency, Limits, RedisBucket, SqlBucket, parse_limits
from gate.states import UpdateStatus
from gate.store.ratelimits import ensure_rate_bucket, rate_bucket_state, rate_limit_stats
from gate.store.schema import rate_limit_bucket
from workers.supervisor import run_until_terminal

CLIENTS = 8


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def redis_url():
    """A real redis-server for the session (PROMPTGATE_TEST_REDIS_URL, else one started
    from PATH or /usr/bin like the MariaDB server). Missing = a failure, not a skip."""
    try:
        import redis  # noqa: F401
    except ImportError:
        pytest.fail(
            "the redis client is missing: pip install 'prompt-gate[redis]' (the dev extra has it)", pytrace=False
        )
    url = os.environ.get("PROMPTGATE_TEST_REDIS_URL")
    if url:
        yield url
        return
    from support.redis_server import LocalRedis

    try:
        server = LocalRedis().start()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server.url()
    finally:
        server.cleanup()


@pytest.fixture
def redis_client(redis_url):
    import redis

    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


_keys = iter(range(10**9))


def fresh_key(name: str) -> str:
    return f"test|{name}|{os.getpid()}-{next(_keys)}-{time.monotonic_ns()}"


@pytest.fixture(params=["mariadb", "sqlite", "redis"])
def bucket_factory(request, tmp_path):
    """Makes independent bucket clients (one per simulated worker) on one shared backend."""
    made = []
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")

        def make():
            made.append(RedisBucket(url))
            return made[-1]
    else:
        db_url = (
            request.getfixturevalue("mysql_url") if request.param == "mariadb" else f"sqlite:///{tmp_path / 'gate.db'}"
        )
        gate = Gate.connect(migrated(db_url), upgrade=True)

        def make():
            made.append(SqlBucket(gate.engine))
            return made[-1]

    make.backend = request.param
    yield make
    for b in made:
        b.close()
    if request.param != "redis":
        gate.close()


def hammer(clients: int, body) -> list[int]:
    """Run ``body(i)`` in ``clients`` threads released together; their grant counts."""
    start = threading.Barrier(clients)
    counts = [0] * clients
    errors = []

    def run(i):
        try:
            start.wait()
            counts[i] = body(i)
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return counts


# ----------------------------------------------------------------------------- limits


def test_limits_parse_match_and_size_buckets():
    limits = Limits(
        parse_limits(
            "gpt-4o-mini=rpm:600,tpm:200000; gpt-4o*=rpm:120,burst:5;"
            " *@localhost:8000=tpm:1000,tpm_burst:500; *=rpm:1000"
        ),
        headroom=0.9,
    )
    exact = limits.buckets_for("api.openai.com", "gpt-4o-mini")
    assert [(b.key, b.capacity, round(b.refill_per_second, 6), b.unit) for b in exact] == [
        ("api.openai.com|gpt-4o-mini|rpm", 10.0, 9.0, "requests"),
        ("api.openai.com|gpt-4o-mini|tpm", 3334.0, round(200000 / 60 * 0.9, 6), "tokens"),
    ]
    glob = limits.buckets_for("api.openai.com", "gpt-4o-2024")
    assert [(b.key, b.capacity) for b in glob] == [("api.openai.com|gpt-4o-2024|rpm", 5.0)]
    local = limits.buckets_for("LOCALHOST:8000", "llama")
    assert [(b.key, b.capacity, b.unit) for b in local] == [("localhost:8000|llama|tpm", 500.0, "tokens")]
    fallback = limits.buckets_for("api.openai.com", "o3")
    assert [(b.key, b.capacity) for b in fallback] == [("api.openai.com|o3|rpm", 17.0)]
    # every model has its own bucket, whichever rule it matched
    assert limits.buckets_for("h", "a")[0].key != limits.buckets_for("h", "b")[0].key
    assert not Limits(parse_limits("")) and Limits(parse_limits("x=rpm:1")).buckets_for("h", "y") == []


@pytest.mark.parametrize(
    "bad, words",
    [
        ("gpt-4o", "expected MODEL=rpm:N"),
        ("=rpm:5", "model name"),
        ("m=rps:5", "unknown option"),
        ("m=rpm:fast", "must be a number"),
        ("m=rpm:0", "positive"),
        ("m=burst:5", "give rpm"),
        ("m=tpm:100,burst:5", "burst goes with rpm"),
    ],
)
def test_limits_refuse_bad_entries_with_a_reason(bad, words):
    with pytest.raises(UsageError, match=words):
        parse_limits(bad)


# ----------------------------------------------------------------------------- the race


def test_naive_get_compare_incr_overshoots_its_cap(redis_client):
    """The classic bug: read the counter, compare in the app, then increment. Eight clients
    all read "used < cap" and all pass."""
    cap, key = 50, fresh_key("naive")

    def naive_client(_):
        granted = 0
        while True:
            used = int(redis_client.get(key) or 0)  # GET
            if used >= cap:  # compare, in the application
                return granted
            time.sleep(0.0005)  # the app's own work / a LAN round trip
            redis_client.incr(key)  # INCR
            granted += 1

    grants = sum(hammer(CLIENTS, naive_client))
    assert grants > cap, f"the naive limiter happened to hold ({grants} grants); the race is real but rare here"


def test_naive_select_then_update_overshoots_on_mariadb(mysql_gate):
    """The same bug on the database, as an ORM writes it: SELECT the tokens, compare in
    the app, write back the value it computed (``bucket.tokens -= 1; commit``)."""
    cap, key, b = 50, fresh_key("naive-sql"), rate_limit_bucket
    with mysql_gate.engine.begin() as conn:
        ensure_rate_bucket(conn, key, cap, 0.0)

    def naive_client(_):
        granted = 0
        while True:
            with mysql_gate.engine.begin() as conn:
                tokens = conn.execute(select(b.c.tokens).where(b.c.name == key)).scalar()
                if tokens < 1:
                    return granted
                time.sleep(0.0005)
                conn.execute(update(b).where(b.c.name == key).values(tokens=tokens - 1))
            granted += 1

    grants = sum(hammer(CLIENTS, naive_client))
    assert grants > cap


def test_atomic_bucket_grants_exactly_its_budget(bucket_factory):
    """A budget that does not refill: 8 clients hammering get exactly ``cap`` grants
    between them, on MariaDB, SQLite and Redis (taking one call at a time, or several)."""
    cap, key = 61, fresh_key("static")
    clients = [bucket_factory() for _ in range(CLIENTS)]
    for c in clients:
        c.configure(key, cap, 0.0)

    def atomic_client(i):
        granted = 0
        while True:
            calls, wait = clients[i].take(key, 1, up_to=1 + i % 4)
            if calls:
                assert 1 <= calls <= 1 + i % 4 and wait == 0
                granted += calls
            elif wait == float("inf"):
                return granted
            else:
                raise AssertionError(f"unexpected wait {wait}")

    counts = hammer(CLIENTS, atomic_client)
    assert sum(counts) == cap, counts


@pytest.mark.parametrize("threads_per_client", [1, CLIENTS], ids=["8-clients", "8-threads-1-client"])
def test_atomic_bucket_never_exceeds_its_rate_in_a_window(bucket_factory, threads_per_client):
    """A refilling bucket (size 5, 40 per second): 8 clients (or 8 threads of one client,
    which queue locally and take tokens for each other) waiting through ``acquire`` for
    2.5 s get at most size + rate × elapsed grants, and most of that budget."""
    capacity, rate, window, key = (
        5,
        40.0,
        2.5,
        fresh_key("rate"),
    )  # long enough that a slow commit or two do not decide it
    clients = [bucket_factory() for _ in range(CLIENTS // threads_per_client)] * threads_per_client
    for c in clients:
        c.configure(key, capacity, rate)
    started = time.monotonic()
    end = started + window

    def client(i):
        granted = 0
        while (left := end - time.monotonic()) > 0:
            if clients[i].acquire(key, 1, timeout=left):
                granted += 1
        return granted

    grants = sum(hammer(CLIENTS, client))
    elapsed = time.monotonic() - started
    ceiling = capacity + rate * elapsed
    assert grants <= ceiling, (grants, ceiling)
    assert grants >= 0.7 * (capacity + rate * window), (grants, ceiling)  # and the budget is used


def test_a_429_pauses_the_limit_for_every_worker(bucket_factory):
    key = fresh_key("pause")
    a, b = bucket_factory(), bucket_factory()
    for c in (a, b):
        c.configure(key, 50, 20.0)
    assert b.acquire(key, 1, timeout=1)
    a.pause(key, 0.6)  # worker A saw a 429 with Retry-After: 0.6
    started = time.monotonic()
    assert b.take(key, 1)[1] > 0.5  # worker B is told to wait...
    assert b.acquire(key, 1, timeout=3)  # ...and waits out the pause
    resumed = time.monotonic()
    assert resumed - started >= 0.55
    # the bucket refills from the end of the pause: no burst of its 50 tokens right after it,
    # only what 20 tokens/s refilled while the ten takes ran (a loaded machine makes them slow)
    burst = sum(a.take(key, 1)[0] for _ in range(10))
    assert burst <= 2 + 20.0 * (time.monotonic() - resumed), burst


def test_redis_scripts_run_by_sha_reload_after_noscript_and_stay_two(redis_client, redis_url):
    bucket = RedisBucket(redis_url)
    redis_client.script_flush()
    assert redis_client.script_exists(bucket._shas[TAKE_SCRIPT]) == [False]
    for i in range(20):  # many keys and costs: still the same two scripts
        key = fresh_key(f"sha{i}")
        bucket.configure(key, 100 + i, 1.5 * i)
        assert bucket.take(key, 1 + i) == (1, 0.0)
        bucket.pause(key, 0.01 * i)
    assert redis_client.script_exists(bucket._shas[TAKE_SCRIPT]) == [True]
    assert int(redis_client.info("memory")["number_of_cached_scripts"]) == 2
    assert "test|" not in TAKE_SCRIPT and "KEYS[1]" in TAKE_SCRIPT
    bucket.close()


# ----------------------------------------------------------------------------- adaptive concurrency


def test_concurrency_halves_on_429_once_per_round_and_grows_back():
    ac = AdaptiveConcurrency(8)
    tickets = [ac.acquire() for _ in range(8)]
    assert ac.current == 8 and ac.active == 8
    ac.release(tickets[0], "rate_limited")
    assert ac.current == 4
    ac.release(tickets[1], "rate_limited")  # was in flight before the cut: no second cut
    assert ac.current == 4
    for t in tickets[2:]:
        ac.release(t, "ok")
    grown = ac.limit
    assert 4 < grown < 6
    t = ac.acquire()
    ac.release(t, "rate_limited")  # started after the cut: cuts again
    assert ac.current == max(1, int(grown * 0.5))
    for _ in range(200):
        ac.release(ac.acquire(), "ok")
    assert ac.current == 8  # never above the configured concurrency


def test_stop_releases_a_waiter():
    ac = AdaptiveConcurrency(1)
    ac.acquire()
    stop = threading.Event()
    stop.set()
    assert ac.acquire(stop) is None


# ----------------------------------------------------------------------------- a gate run


class WindowPlan(FaultPlan):
    """The local server's requests-per-minute cap over a shorter sliding window (the same
    rate, ``rpm × window / 60`` requests per ``window`` seconds), so a test sees the cap
    bite in seconds rather than minutes."""

    def __init__(self, rpm: int, window: float, **kwargs):
        super().__init__(rate_limit_rpm=rpm, **kwargs)
        self.window, self.cap = window, round(rpm * window / 60)
        self._seen: deque[float] = deque()
        self._window_lock = threading.Lock()
        self.accepted: list[float] = []

    def rate_limited(self, now: float | None = None) -> float | None:
        now = time.monotonic() if now is None else now
        with self._window_lock:
            while self._seen and self._seen[0] <= now - self.window:
                self._seen.popleft()
            if len(self._seen) >= self.cap:
                return max(0.001, self._seen[0] + self.window - now)
            self._seen.append(now)
            self.accepted.append(now)
            return None


@pytest.mark.parametrize("db, items", [("mariadb", 300), ("sqlite", 150)])
def test_gate_run_under_the_servers_rate_limit_sees_few_429s(db, items, request, tmp_path, monkeypatch):
    """The local model server allows 2400 requests per minute (120 per 3 s); the gate's
    limit for the model says the same. The gate waits for its budget instead of burning
    calls on 429s (at most 5 % of calls), and counts the calls it throttled."""
    rpm = 2400
    gate = (
        request.getfixturevalue("mysql_gate")
        if db == "mariadb"
        else Gate.connect(migrated(f"sqlite:///{tmp_path / 'gate.db'}"), upgrade=True)
    )
    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", items)))
    gate.map_dataset("p1", "d", "0.9")
    server = MockLLMServer(latency_ms=5)
    server.faults = WindowPlan(rpm, 3.0, latency_ms=5)
    with server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        settings = gate.settings.with_(
            rate_limits=f"mock-1=rpm:{rpm},burst:3", poll_interval=0.02, backoff_base=0.2, backoff_max=1.0
        )
        limited = Gate(gate.engine, settings)
        uid = limited.submit(rules_spec("p1"), "apply")
        started = time.monotonic()
        (report,) = run_until_terminal(limited, [uid], timeout=40, concurrency=8)
        elapsed = time.monotonic() - started
        stats = server.stats()
    assert report.status == UpdateStatus.APPLIED, report.update.reason
    assert report.runs[0].scored == items
    calls = stats["requests"]
    rate_limited = stats["outcomes"].get("rate_limited", 0)
    assert rate_limited <= 0.05 * calls, stats
    assert elapsed >= (items - 1) / (rpm / 60) * 0.9  # the budget was respected...
    with gate.engine.connect() as conn:
        counts = rate_limit_stats(conn, [report.runs[0].run_id])
        bucket = rate_bucket_state(conn, f"{server.base_url.split('/')[2]}|mock-1|rpm")
    assert counts["throttled_calls"] > items / 2  # ...by waiting, and it shows
    assert counts["rate_limited_calls"] == rate_limited
    assert bucket is not None and bucket.granted == calls
    if db == "sqlite":
        gate.close()


def test_a_calls_token_estimate_takes_the_larger_of_its_output_limits():
    """Review: ``max_tokens: 1`` beside ``max_completion_tokens: 16384`` was estimated at one
    output token, so a pull request's prompt spent a sliver of the shared tokens-per-minute
    budget per call while a provider honouring max_completion_tokens (vLLM, the reasoning
    models) answered up to 16,384: the shared budget no longer protected the provider."""
    from gate.ratelimit.rules import estimate_tokens

    spec = rules_spec("p1")
    messages = [{"role": "user", "content": "abcd"}]
    both = type("Spec", (), {"params": {"max_tokens": 1, "max_completion_tokens": 16384}})()
    assert estimate_tokens(both, messages) == 1 + 4 + 16384
    assert estimate_tokens(spec, messages) == 1 + 4 + 16  # neither: the default
