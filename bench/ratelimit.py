"""Rate limits: several worker processes share one requests-per-minute budget against the
local model server capped at the same rate (its real sliding 60 s window, in its own
process). Figures: the achieved rate as a share of the cap (target >= 95 %) and 429s as
a share of all calls (target <= 1 %). The run lasts a little longer than ``--seconds``
(items = rpm x seconds / 60), past one window, so the server's second minute counts the
first one's calls.

    python bench/ratelimit.py [--rpm 3000] [--seconds 75] [--backend sql|redis]
                              [--processes 4] [--concurrency 8] [--latency-ms 100] [--headroom 0.97]

The achieved rate is measured at the server: its ``ok`` counter sampled every 0.2 s,
from the first answered call to the last.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from common import (
    fresh_database,
    mariadb,
    model_server,
    result,
    rules_spec,
    stop,
    wait_for_workers,
    worker_processes,
    write_dataset,
)


@contextmanager
def redis_server():
    url = os.environ.get("PROMPTGATE_BENCH_REDIS_URL")
    if url:
        yield url
        return
    from support.redis_server import LocalRedis

    server = LocalRedis().start()
    try:
        yield server.url()
    finally:
        server.cleanup()


def sample_ok(base_url: str, samples: list, done: threading.Event) -> None:
    """(monotonic time, ok answers, all requests, 429s) every 0.2 s from the server's /stats."""
    url = base_url.rsplit("/v1", 1)[0] + "/stats"
    while not done.is_set():
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                stats = json.load(resp)
            outcomes = stats.get("outcomes", {})
            samples.append(
                (time.monotonic(), outcomes.get("ok", 0), stats.get("requests", 0), outcomes.get("rate_limited", 0))
            )
        except OSError:
            pass
        done.wait(0.2)


def achieved_per_minute(samples: list) -> tuple[float, float]:
    """Answered calls per minute between the first sample with an answer and the first
    with the final count; and that span in seconds."""
    final = samples[-1][1]
    first = next(s for s in samples if s[1] > 0)
    last = next(s for s in samples if s[1] == final)
    span = last[0] - first[0]
    return (last[1] - first[1]) / span * 60.0, span


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rpm", type=int, default=3000, help="the server's cap and the gate's limit")
    ap.add_argument("--seconds", type=float, default=75.0, help="work for about this long at the cap")
    ap.add_argument("--backend", choices=("sql", "redis"), default="sql")
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=8, help="calls in flight per process (at most)")
    ap.add_argument("--latency-ms", type=float, default=100)
    ap.add_argument("--headroom", type=float, default=None, help="PROMPTGATE_RATE_LIMIT_HEADROOM (default 0.97)")
    args = ap.parse_args()
    from gate.domain import Gate

    items = int(args.rpm * args.seconds / 60)
    with (
        mariadb() as (server_url, _),
        model_server(args.latency_ms, rate_limit_rpm=args.rpm) as base,
        tempfile.TemporaryDirectory() as tmp,
        redis_server() if args.backend == "redis" else _nothing() as redis_url,
    ):
        url = fresh_database(server_url, "bench_ratelimit")
        gate = Gate.connect(url, upgrade=True)
        gate.register_dataset("d", str(write_dataset(Path(tmp) / "d.csv", items)))
        gate.map_dataset("p1", "d", "0.99")
        settings = {
            "rate_limits": f"mock-1=rpm:{args.rpm}",
            "rate_limit_backend": args.backend,
            "chunk_size": args.concurrency,
        }
        if redis_url:
            settings["redis_url"] = redis_url
        if args.headroom is not None:
            settings["rate_limit_headroom"] = args.headroom
        procs = worker_processes(url, base, args.processes, args.concurrency, **settings)
        samples: list = []
        done = threading.Event()
        sampler = threading.Thread(target=sample_ok, args=(base, samples, done), daemon=True)
        try:
            wait_for_workers(gate, args.processes)
            sampler.start()
            started = time.monotonic()
            uid = gate.submit(rules_spec("p1"), "apply", reuse=False)
            report = gate.wait(uid, timeout=args.seconds * 3 + 60, poll=0.2)
            wall = time.monotonic() - started
        finally:
            stop(procs)
            time.sleep(0.3)
            done.set()
            sampler.join(5)
        with gate.engine.connect() as conn:
            from gate.store.ratelimits import rate_limit_stats

            usage = rate_limit_stats(conn, [r.run_id for r in report.runs])
        gate.close()
    assert report.status == "APPLIED", report.update.reason
    rate, span = achieved_per_minute(samples)
    _, ok, requests, limited = samples[-1]
    share_429 = limited / requests if requests else 0.0
    print(
        f"backend={args.backend} processes={args.processes} concurrency={args.concurrency} "
        f"latency={args.latency_ms:g}ms cap={args.rpm}/min items={items} status={report.status} wall={wall:.1f}s"
    )
    print(
        f"server: {requests} calls, {ok} answered, {limited} 429s; answered {rate:.0f}/min over {span:.1f}s "
        f"= {rate / args.rpm:.1%} of the cap; gate: {usage['throttled_calls']} calls throttled "
        f"({usage['throttle_wait_seconds']} s waited), {usage['rate_limited_calls']} saw 429"
    )
    ok_429 = result(f"rate limit ({args.backend}) 429s/calls", share_429, "", 0.01, higher_is_better=False)
    ok_rate = result(f"rate limit ({args.backend}) achieved/cap", rate / args.rpm, "", 0.95, higher_is_better=True)
    return ok_429 and ok_rate


@contextmanager
def _nothing():
    yield None


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
