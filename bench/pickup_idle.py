"""Pickup latency and idle cost with default poll settings: one idle `promptgate worker`
process; queries per second it costs the server while idle (MariaDB `Questions`, read
before and after, minus this script's own two reads), then the time from a submission
to its run being claimed for materialization. Targets: idle < 5 queries/s per process;
pickup ≤ 0.5 s (median of 5 submissions).

Either way the submission knocks on the idle probe after its commit (gate.store.wake): the
pickup is the knock's, the idle cost the probes that wait in their statement.
``--via service``: a `promptgate serve` runs beside the worker and the submissions are POSTed
to it; ``--via database``: they are made on the database, as `promptgate submit` makes them.

    python bench/pickup_idle.py [--idle-seconds 10] [--via database|service]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

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
    ap.add_argument("--via", choices=["database", "service"], default="database")
    args = ap.parse_args()

    with mariadb() as (server_url, _), model_server(0) as base, tempfile.TemporaryDirectory() as tmp:
        url, gate = gated_dataset(server_url, "bench_pickup", tmp, 20, "0.5")
        with _service(url, Path(tmp)) if args.via == "service" else nullcontext(None) as served:
            procs = worker_processes(url, base, 1, 8)
            try:
                wait_for_workers(gate, 1)
                time.sleep(2)
                before = server_status(gate.engine, "Questions")["Questions"]
                time.sleep(args.idle_seconds)
                after = server_status(gate.engine, "Questions")["Questions"]
                idle_qps = (after - before - 1) / args.idle_seconds
                pickups = [_pickup(gate, served, i) for i in range(5)]
            finally:
                stop(procs)
    print(f"idle queries/s per process ({args.via}): {idle_qps:.2f} (target < 5)")
    print("pickup latencies: " + ", ".join(f"{p:.3f}s" for p in pickups))
    idle_ok = idle_qps < 5
    return result("pickup latency (median)", statistics.median(pickups), "s", 0.5, higher_is_better=False) and idle_ok


def _service(url: str, folder: Path):
    from support.service_harness import Service

    class Served:
        def __enter__(self):
            self.service = Service(url, folder)
            self.client = self.service.client("admin")
            return self

        def __exit__(self, *exc):
            self.client.close()
            self.service.stop()

    return Served()


def _pickup(gate, served, i: int) -> float:
    """Seconds from a submission's start (the call, or the POST, through the service) to its
    run's first claim: the knock follows the commit inside the call, so the time from its
    return would leave it out. Then it is waited for, and the worker left idle 2 s."""
    from gate.store.runs import get_run

    began = time.monotonic()
    if served is None:
        uid = gate.submit(rules_spec("p1"), "check", {"key": f"pickup-{i}"}, reuse=False)
    else:
        body = {"prompt": rules_spec("p1").to_config(), "mode": "check", "source_key": f"pickup-{i}", "reuse": False}
        posted = served.client.post("/v1/updates", json=body)
        assert posted.status_code == 202, posted.text
        uid = posted.json()["id"]
    run_id = gate.status(uid).runs[0].run_id
    while True:
        with gate.engine.connect() as conn:
            if get_run(conn, run_id).attempt > 0:
                break
        time.sleep(0.005)
    pickup = time.monotonic() - began
    gate.wait(uid, timeout=30)
    time.sleep(2)  # idle again before the next one
    return pickup


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
