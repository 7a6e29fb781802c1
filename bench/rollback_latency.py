"""A rollback never waits for the fleet (issue 47): the time from a rollback (``Gate.rollback``,
what `promptgate rollback` and the service's endpoint call) to its return, which is when the
live row has changed (the request DONE), on a durable MariaDB. 100 rollbacks with no worker
running (the requester runs the reconcile step itself, at once: no live worker runs
reconcile), then 100 with one idle `promptgate worker` (default settings: its reconcile step
picks the request up through the activity probe, or the requester runs it after 0.5 s).
Each rollback starts at a random moment (0-0.3 s after the last). Target: p99 ≤ 1 s, each way.

    python bench/rollback_latency.py [--rollbacks 100]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time

from common import gated_dataset, mariadb, model_server, result, stop, wait_for_workers, worker_processes


def timed_rollbacks(gate, n: int) -> list[float]:
    took = []
    for i in range(n):
        time.sleep(random.uniform(0, 0.3))
        started = time.monotonic()
        done = gate.rollback("p1", reason=f"bench rollback {i}", actor="bench")
        took.append(time.monotonic() - started)
        assert gate.live("p1").version == done["version"]
    return took


def p99(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.99 * len(values)) - 1)]


def say(label: str, took: list[float]) -> None:
    print(
        f"{label}: n={len(took)} p50 {statistics.median(took) * 1000:.1f} ms, p99 {p99(took) * 1000:.1f} ms, "
        f"max {max(took) * 1000:.1f} ms",
        flush=True,
    )


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rollbacks", type=int, default=100)
    args = ap.parse_args()
    from support.helpers import rules_spec

    from workers.supervisor import run_until_terminal

    with mariadb() as (server_url, _), model_server(0) as base, tempfile.TemporaryDirectory() as tmp:
        os.environ.update({"OPENAI_BASE_URL": base, "OPENAI_API_KEY": "bench"})
        url, gate = gated_dataset(server_url, "bench_rollback", tmp, 20, "0.5")
        for description in ("A", "B"):
            (report,) = run_until_terminal(gate, [gate.submit(rules_spec("p1", description), "apply")], timeout=60)
            assert report.status == "APPLIED", report.update.reason
        alone = timed_rollbacks(gate, args.rollbacks)
        say("no worker running", alone)
        procs = worker_processes(url, base, 1, 8)
        try:
            wait_for_workers(gate, 1)
            with_worker = timed_rollbacks(gate, args.rollbacks)
        finally:
            stop(procs)
        say("one idle worker running", with_worker)
        gate.close()
    ok_alone = result("rollback p99, no worker", p99(alone), "s", 1.0, higher_is_better=False)
    return result("rollback p99, one worker", p99(with_worker), "s", 1.0, higher_is_better=False) and ok_alone


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
