"""P1 end to end: 1,000 items, the local model server at 200 ms fixed latency, 32 calls in
flight; wall time from submit to terminal status (seen by a 20 ms status poll; the report
is read after the clock stops) vs the ideal ⌈1000/32⌉ × 0.2 s. Target: ≤ 1.10 × ideal.

``--template filtered`` makes the user message ``{{ item.text | trim }}``: not a plain item
lookup, so every item renders in the worker's template sandbox (a child process with a
CPU-time and memory budget, gate/prompt/sandbox.py): that run measures the sandbox's overhead.

One run submits ``--submissions`` updates (default 3, one prompt each over the same
dataset) one after another, each at a random moment of the workers' probe cycle, and
judges the median: pickup alone varies by up to one probe interval (0.25 s, ~4 % of the
ideal) with that moment. The workers are two processes of 16 calls in flight, one per core
of this machine as README advises; ``--processes 1`` measures one process of 32.

    python bench/submit_to_verdict.py [--items 1000] [--latency-ms 200] [--concurrency 32] [--processes 2]
                                  [--submissions 3] [--template plain|filtered]
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time

from common import (
    gated_dataset,
    mariadb,
    model_server,
    pause_at_random_probe_phase,
    result,
    rules_spec,
    stop,
    wait_for_workers,
    worker_processes,
)

from gate.store.runs import get_run


def candidate(name: str, template: str):
    """The rules prompt; with ``filtered`` its user message goes through a filter."""
    spec = rules_spec(name)
    if template == "plain":
        return spec
    from gate.prompt.spec import parse_spec

    config = spec.to_config()
    config["messages"][-1]["content"] = "{{ item.text | trim }}"
    return parse_spec(config)


def one_submission(gate, name: str, ideal: float, template: str = "plain") -> float:
    started = time.monotonic()
    uid = gate.submit(candidate(name, template), "apply", reuse=False)  # measure calls, not reuse
    gate.wait_status(uid, timeout=120, poll=0.02)
    wall = time.monotonic() - started
    report = gate.status(uid)
    with_report = time.monotonic() - started
    u = report.update
    assert report.status == "APPLIED", u.reason
    with gate.engine.connect() as conn:
        run = get_run(conn, report.runs[0].run_id)
    t0 = u.created_at
    print(
        f"{name}: wall={wall:.2f}s ({wall / ideal:.3f}x ideal; report in hand at {with_report:.2f}s); "
        "after submit: run started %.2f, materialized %.2f, run finished %.2f, update finished %.2f"
        % tuple(
            (t - t0).total_seconds() for t in (run.started_at, run.materialized_at, run.finished_at, u.finished_at)
        ),
        flush=True,
    )
    return wall


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--latency-ms", type=float, default=200)
    ap.add_argument("--concurrency", type=int, default=32, help="calls in flight in all")
    ap.add_argument(
        "--processes",
        type=int,
        default=2,
        help="worker processes sharing the calls in flight (default: one per core here)",
    )
    ap.add_argument("--submissions", type=int, default=3)
    ap.add_argument(
        "--template",
        choices=["plain", "filtered"],
        default="plain",
        help="filtered: every item renders in the template sandbox",
    )
    args = ap.parse_args()
    ideal = math.ceil(args.items / args.concurrency) * args.latency_ms / 1000
    names = [f"p{k + 1}" for k in range(args.submissions)]
    with mariadb() as (server_url, _), model_server(args.latency_ms) as base, tempfile.TemporaryDirectory() as tmp:
        url, gate = gated_dataset(server_url, "bench_p1", tmp, args.items, "0.99", prompts=names)
        per_process = args.concurrency // args.processes
        procs = worker_processes(url, base, args.processes, per_process, chunk_size=per_process)
        try:
            wait_for_workers(gate, args.processes)
            walls = []
            for k, name in enumerate(names):
                if k:
                    pause_at_random_probe_phase(gate)
                walls.append(one_submission(gate, name, ideal, args.template))
        finally:
            stop(procs)
    print(
        f"items={args.items} latency={args.latency_ms}ms in_flight={args.concurrency} processes={args.processes} "
        f"template={args.template} ideal={ideal:.2f}s walls={', '.join(f'{w:.2f}s' for w in walls)}"
    )
    what = "" if args.template == "plain" else f", {args.template} template"
    return result(
        f"P1 end-to-end wall/ideal (median{what})", statistics.median(walls) / ideal, "x", 1.10, higher_is_better=False
    )


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
