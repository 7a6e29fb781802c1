"""Pickup latency and idle cost with default poll settings: one idle `promptgate worker`
process; queries per second it costs the server while idle (MariaDB `Questions`, read
before and after, minus this script's own two reads), then the time from a submission
to its run being claimed for materialization. Targets: idle < 5 queries/s per process;
pickup ≤ 0.5 s (median of 5 submissions).

    python bench/pickup_idle.py [--idle-seconds 10]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from common import (
    gated_dataset,
    mariadb,
    model_server,
    result,
    rules_spec,
    server_status,
    stop,
    wait_for_workers,
    worker_processes,
)


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle-seconds", type=float, default=10)
    args = ap.parse_args()
    from gate.store.runs import get_run

    with mariadb() as (server_url, _), model_server(0) as base, tempfile.TemporaryDirectory() as tmp:
        url, gate = gated_dataset(server_url, "bench_pickup", tmp, 20, "0.5")
        procs = worker_processes(url, base, 1, 8)
        try:
            wait_for_workers(gate, 1)
            time.sleep(2)
            before = server_status(gate.engine, "Questions")["Questions"]
            time.sleep(args.idle_seconds)
            after = server_status(gate.engine, "Questions")["Questions"]
            idle_qps = (after - before - 1) / args.idle_seconds
            pickups = []
            for i in range(5):
                uid = gate.submit(rules_spec("p1"), "check", {"key": f"pickup-{i}"}, reuse=False)
                submitted = time.monotonic()
                run_id = gate.status(uid).runs[0].run_id
                while True:
                    with gate.engine.connect() as conn:
                        if get_run(conn, run_id).attempt > 0:
                            break
                    time.sleep(0.005)
                pickups.append(time.monotonic() - submitted)
                gate.wait(uid, timeout=30)
                time.sleep(2)  # idle again before the next one
        finally:
            stop(procs)
    print(f"idle queries/s per process: {idle_qps:.2f} (target < 5)")
    print("pickup latencies: " + ", ".join(f"{p:.3f}s" for p in pickups))
    idle_ok = idle_qps < 5
    return result("pickup latency (median)", statistics.median(pickups), "s", 0.5, higher_is_better=False) and idle_ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
