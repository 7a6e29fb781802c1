"""A judged run end to end (gate/prompt/judge.py): 1,000 tickets, the local model server at
200 ms fixed latency, 32 calls in flight; each item's reply is drafted by the candidate and
then graded by the judge's live version, and 20 of the judge's labelled items ride along as
sentinels. Wall time from submit to terminal status (a 20 ms status poll) against the ideal
of candidate and judge calls pipelined item by item, 2 × ⌈1000/32⌉ × 0.2 s = 12.8 s (a
chunk's candidate calls all made before its judge calls would be slower by the wait for the
chunk's last answer). Target: ≤ 1.15 × ideal.

The judge is applied first (its own evaluation on 100 labelled replies, not timed). The
workers are two processes of 16 calls in flight, as bench/submit_to_verdict.py.

    python bench/judged_run.py [--items 1000] [--latency-ms 200] [--concurrency 32] [--processes 2]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

from common import (
    fresh_database,
    mariadb,
    model_server,
    pause_at_random_probe_phase,
    result,
    stop,
    wait_for_workers,
    worker_processes,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.judging import judge_spec, reply_spec, write_labels, write_tickets  # noqa: E402

from gate.domain import Gate  # noqa: E402
from gate.store.runs import get_run  # noqa: E402


def staged(server_url: str, folder: Path, items: int) -> Gate:
    """A fresh database: the judge mapped to its labelled replies, the candidate to tickets."""
    gate = Gate.connect(fresh_database(server_url, "bench_judged"), upgrade=True)
    gate.register_dataset("reply-labels", str(write_labels(folder / "labels.csv", 100)))
    gate.map_dataset("reply-judge", "reply-labels", "0.9")
    gate.register_dataset("tickets", str(write_tickets(folder / "tickets.csv", items)))
    gate.map_dataset("reply", "tickets", "0.5")
    return gate


def timed(gate: Gate, spec, mode: str, ideal: float | None) -> tuple[float, object]:
    started = time.monotonic()
    uid = gate.submit(spec, mode, reuse=False)  # measure calls, not reuse
    gate.wait_status(uid, timeout=300, poll=0.02)
    wall = time.monotonic() - started
    report = gate.status(uid)
    assert report.status in ("APPLIED", "PASSED"), report.update.reason
    if ideal:
        with gate.engine.connect() as conn:
            run = get_run(conn, report.runs[0].run_id)
        t0 = report.update.created_at
        print(
            f"{spec.name}: wall={wall:.2f}s ({wall / ideal:.3f}x ideal); after submit: run started %.2f, "
            "materialized %.2f, run finished %.2f, update finished %.2f"
            % tuple(
                (t - t0).total_seconds()
                for t in (run.started_at, run.materialized_at, run.finished_at, report.update.finished_at)
            ),
            flush=True,
        )
    return wall, report


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--latency-ms", type=float, default=200)
    ap.add_argument("--concurrency", type=int, default=32, help="calls in flight in all")
    ap.add_argument("--processes", type=int, default=2)
    args = ap.parse_args()
    ideal = 2 * math.ceil(args.items / args.concurrency) * args.latency_ms / 1000
    with mariadb() as (server_url, _), model_server(args.latency_ms) as base, tempfile.TemporaryDirectory() as tmp:
        gate = staged(server_url, Path(tmp), args.items)
        per_process = args.concurrency // args.processes
        procs = worker_processes(gate.settings.database_url, base, args.processes, per_process, chunk_size=per_process)
        try:
            wait_for_workers(gate, args.processes)
            timed(gate, judge_spec(), "apply", None)  # the judge goes live first: not timed
            pause_at_random_probe_phase(gate)
            wall, report = timed(gate, reply_spec(), "check", ideal)
        finally:
            stop(procs)
    judged = report.runs[0].judge
    roles = judged["calls"]
    print(
        f"items={args.items} latency={args.latency_ms}ms in_flight={args.concurrency} processes={args.processes} "
        f"ideal={ideal:.2f}s wall={wall:.2f}s calls: candidate {roles['candidate']['calls']}, judge "
        f"{roles['judge']['calls']}, sentinel {roles['sentinel']['calls']}; pass rate {judged['pass_rate']:.3f}"
    )
    return result(
        "judged run wall/ideal (candidate + judge pipelined)", wall / ideal, "x", 1.15, higher_is_better=False
    )


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
