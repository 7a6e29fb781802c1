"""P1 end to end: 1,000 items, the local model server at 200 ms fixed latency, 32 calls in
flight; wall time from submit to terminal status (seen by a 20 ms status poll; the report
is read after the clock stops) vs the ideal ⌈1000/32⌉ × 0.2 s. Target: ≤ 1.10 × ideal.

    python bench/p1_end_to_end.py [--items 1000] [--latency-ms 200] [--concurrency 32] [--processes 1]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time

from common import (gated_dataset, mariadb, model_server, result, rules_spec, stop, wait_for_workers,
                    worker_processes)


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--latency-ms", type=float, default=200)
    ap.add_argument("--concurrency", type=int, default=32, help="calls in flight in all")
    ap.add_argument("--processes", type=int, default=1)
    args = ap.parse_args()
    ideal = math.ceil(args.items / args.concurrency) * args.latency_ms / 1000
    with mariadb() as (server_url, _), model_server(args.latency_ms) as base, \
            tempfile.TemporaryDirectory() as tmp:
        url, gate = gated_dataset(server_url, "bench_p1", tmp, args.items, "0.99")
        per_process = args.concurrency // args.processes
        procs = worker_processes(url, base, args.processes, per_process, chunk_size=per_process)
        try:
            wait_for_workers(gate, args.processes)
            started = time.monotonic()
            uid = gate.submit(rules_spec("p1"), "apply")
            gate.wait_status(uid, timeout=120, poll=0.02)
            wall = time.monotonic() - started
            report = gate.status(uid)
            with_report = time.monotonic() - started
        finally:
            stop(procs)
        u, run = report.update, report.runs[0]
        with gate.engine.connect() as conn:
            from gate import store
            r = store.get_run(conn, run.run_id)
        t0 = u.created_at
        print("timeline (s after submit): run started %.2f, materialized %.2f, run finished %.2f, update finished %.2f"
              % tuple((t - t0).total_seconds() for t in (r.started_at, r.materialized_at, r.finished_at, u.finished_at)))
        print(f"items={args.items} latency={args.latency_ms}ms in_flight={args.concurrency} "
              f"processes={args.processes} status={report.status} wall={wall:.2f}s ideal={ideal:.2f}s "
              f"(the bench's first report in hand at {with_report:.2f}s)")
        assert report.status == "APPLIED", report.update.reason
        return result("P1 end-to-end wall/ideal", wall / ideal, "x", 1.10, higher_is_better=False)


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
