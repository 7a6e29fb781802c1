"""P4 database ceiling: with an in-process model that answers instantly, items scored per
second by the workers (every role, in as many processes as the bare loop has: two)
against the bare claim pattern on the same MariaDB in the same run
(``db_bare_ceiling.py``). Target: ≥ 0.5 of the bare ceiling,
for each kind of run:

* ``fresh``: submitted with ``--no-reuse`` (fresh answers, none kept);
* ``kept``: the default submit with nothing to reuse yet (fresh answers, each kept for reuse);
* ``reused``: the apply after a passing check of the same prompt (every answer reused).

    python bench/db_ceiling.py [--items 20000] [--concurrency 32] [--chunk-size 256]
                                  [--modes fresh,kept,reused] [--processes 2] [--timings]

Each run is materialized first, so the figure is the scoring rate (P4 is about claims and
write-backs). ``--timings`` prints where each run's time went (``store_timing.py``).
With an instant model nothing waits on calls, so the chunk is what amortizes the claim
and write-back commits: 256 here (PROMPTGATE_CHUNK_SIZE; the default 32 suits calls of
~100 ms and more, where chunks of the size of the calls in flight keep latency low).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from common import fresh_database, mariadb, mariadb_process, result, rules_spec, server_seconds, write_dataset
from db_bare_ceiling import bare_ceiling

TARGET_RATIO = 0.5


def instant(spec, item, settings=None, **_):
    """The model: answers at once, right by the dataset's rule (alpha → yes)."""
    return ANSWERS["alpha" in item["text"]]


def _answers():
    from gate.calls.llm import CallResult

    return {
        right: CallResult(
            decision=label, valid=True, raw_output=label, latency_ms=0, prompt_tokens=1, completion_tokens=1
        )
        for right, label in ((True, "yes"), (False, "no"))
    }


ANSWERS = _answers()


def materialized(gate, mode: str, reuse: bool) -> int:
    from workers.materialize import Materializer

    uid = gate.submit(rules_spec("p1"), mode, reuse=reuse)
    materializer = Materializer(gate.engine, gate.settings, threading.Event())
    while materializer.poll() == 0:
        pass
    return uid


def prepared_worker(gate, concurrency: int):
    """A worker of every role with the instant model, its connections open and its template
    sandbox started — what a fleet that is already running has — but its loops not begun."""
    from gate.db import warm_pool
    from workers.supervisor import ROLES, WorkerProcess

    worker = WorkerProcess(gate.engine, gate.settings, ROLES, concurrency, instant)
    warm_pool(gate.engine, len(worker.pollers) + 2)
    worker.renderer.warm()
    return worker


def worker_process(url: str, chunk_size: int, uid: int, concurrency: int, ready, go, spent=None, done=None) -> None:
    """One worker process of every role with the instant model, until update ``uid`` ends:
    prepared, then ``ready`` set, then started when ``go`` is set. ``spent``: set to the CPU
    seconds this process and its template sandboxes spent from ``go`` to the update's end
    (its start-up and drain left out: what scoring costs, not what starting a worker does).
    ``done``: set by the parent once it saw the update end (a fleet polls no update's
    status; without it, this process polls it every 50 ms, as it did before)."""
    from gate.domain import Gate

    gate = Gate.connect(url)
    gate = Gate(gate.engine, gate.settings.with_(chunk_size=chunk_size))
    worker = prepared_worker(gate, concurrency)
    ready.set()
    go.wait()
    begun = tree_cpu()
    worker.start()
    try:
        if done is None:
            gate.wait(uid, timeout=900, poll=0.05)
        else:
            done.wait(900)
        if spent is not None:
            spent.value = tree_cpu() - begun
    finally:
        worker.shutdown()


def tree_cpu() -> float:
    """CPU seconds of this process and its live children (the template sandboxes)."""
    import psutil

    me = psutil.Process()
    return sum(sum(p.cpu_times()[:2]) for p in [me, *me.children(recursive=True)])


def scored_per_second(gate, uid: int, args, timings: bool, processes: int = 2) -> float:
    """Score the materialized update ``uid`` with ``processes`` worker processes (in this
    process with ``timings``, so its store calls can be timed), each prepared before the
    clock starts as a running fleet is; items per second from their start to the update's
    terminal status, read by this process as ``promptgate wait`` would."""
    import multiprocessing
    import resource

    from store_timing import StoreTimer

    context = multiprocessing.get_context("fork")
    timer = StoreTimer(gate.engine) if timings else None
    server = mariadb_process(gate.engine.url.port)
    go, done = context.Event(), context.Event()
    readies = [context.Event() for _ in range(0 if timings else processes)]
    spent = [context.Value("d", 0.0) for _ in readies]
    children = [
        context.Process(
            target=worker_process,
            args=(
                gate.settings.database_url,
                args.chunk_size,
                uid,
                args.concurrency // processes,
                ready,
                go,
                cpu,
                done,
            ),
        )
        for ready, cpu in zip(readies, spent)
    ]
    for child in children:
        child.start()
    for ready in readies:
        ready.wait(60)
    local = prepared_worker(gate, args.concurrency) if timings else None
    child_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_cpu, cpu, started = server_seconds(server), time.process_time(), time.monotonic()
    if timer:
        timer.__enter__()
    try:
        go.set()
        if local:
            local.start()
        report = gate.wait(uid, timeout=900, poll=0.02)
        wall = time.monotonic() - started
    finally:
        done.set()
        if local:
            local.shutdown()
        if timer:
            timer.__exit__(None, None, None)
        for child in children:
            child.join(60)
    cpu, server_cpu = time.process_time() - cpu, server_seconds(server) - server_cpu
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu += (after.ru_utime + after.ru_stime) - (child_cpu.ru_utime + child_cpu.ru_stime)
    scored = sum(r.scored for r in report.runs)
    if scored != args.items:
        raise RuntimeError(f"update {uid} scored {scored} of {args.items} items: {report.status} {report.reason}")
    reused = sum(r.reused_total for r in report.runs)
    shown = "1 process (timed)" if timings else f"{processes} process(es)"
    in_run = f" ({1e6 * sum(v.value for v in spent) / scored:.0f} in the run)" if spent else ""
    print(
        f"  update {uid}: {shown}, scored={scored} status={report.status} wall={wall:.2f}s "
        f"rate={scored / wall:.0f} items/s{f' reused={reused}' if reused else ''}; CPU: the gate "
        f"{1e6 * cpu / scored:.0f}{in_run} µs/item ({100 * cpu / wall:.0f} % of a core), MariaDB "
        f"{1e6 * server_cpu / scored:.0f} µs/item",
        flush=True,
    )
    if timer:
        timer.print(args.items)
    return scored / wall


def gate_rate(server_url: str, kind: str, args, n: int) -> float:
    from gate.domain import Gate

    with tempfile.TemporaryDirectory() as tmp:
        url = fresh_database(server_url, f"bench_p4_{kind}_{n}")
        gate = Gate.connect(url, upgrade=True)
        gate.register_dataset("d", str(write_dataset(Path(tmp) / "d.csv", args.items)))
    gate.map_dataset("p1", "d", "0.99")
    gate = Gate(gate.engine, gate.settings.with_(chunk_size=args.chunk_size))
    print(f"{kind}:", flush=True)
    if kind == "reused":  # the check first (its answers kept), then the apply reuses every one
        scored_per_second(gate, materialized(gate, "check", True), args, False, args.processes)
    uid = materialized(gate, "apply", kind != "fresh")
    rate = scored_per_second(gate, uid, args, args.timings, args.processes)
    gate.close()
    return rate


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=20000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--chunk-size", type=int, default=256)
    ap.add_argument("--modes", default="fresh,kept,reused")
    ap.add_argument("--runs", type=int, default=1, help="runs of each (the median is judged)")
    ap.add_argument(
        "--processes",
        type=int,
        default=2,
        help="worker processes scoring: as many as the bare ceiling's claimers, by default",
    )
    ap.add_argument("--timings", action="store_true", help="where the time went (one worker, in this process)")
    args = ap.parse_args()
    kinds = [k.strip() for k in args.modes.split(",") if k.strip()]
    import workers.execute.executor  # noqa: F401  (the model client's imports, ~1-2 s, before any clock starts)

    ok = True
    with mariadb() as (server_url, _):
        rates = {kind: [] for kind in kinds}
        bare = []
        for n in range(args.runs):  # alternating, so a drift of the machine falls on each alike
            bare.append(bare_ceiling(server_url, args.items, args.chunk_size, 2, f"bench_bare_{n}"))
            for kind in kinds:
                rates[kind].append(gate_rate(server_url, kind, args, n))
        ceiling = statistics.median(bare)
        print(f"bare ceiling median {ceiling:.0f} items/s ({', '.join(f'{b:.0f}' for b in bare)})")
        for kind in kinds:
            rate = statistics.median(rates[kind])
            print(
                f"{kind}: median {rate:.0f} items/s ({', '.join(f'{r:.0f}' for r in rates[kind])}) = "
                f"{rate / ceiling:.3f} of the bare ceiling"
            )
        worst = min(kinds, key=lambda k: statistics.median(rates[k]))
        ok = result(
            f"P4 items/s of the bare ceiling (instant model, worst of {','.join(kinds)}: {worst})",
            statistics.median(rates[worst]) / ceiling,
            "x",
            TARGET_RATIO,
            higher_is_better=True,
        )
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
