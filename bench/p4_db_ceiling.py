"""P4 database ceiling: with an in-process model that answers instantly, items scored per
second by the workers (every role, one process) against the bare claim pattern on the
same MariaDB in the same run (``p4_bare_ceiling.py``). Target: ≥ 0.5 of the bare ceiling,
for each kind of run:

* ``fresh``: submitted with ``--no-reuse`` (fresh answers, none kept);
* ``kept``: the default submit with nothing to reuse yet (fresh answers, each kept for reuse);
* ``reused``: the apply after a passing check of the same prompt (every answer reused).

    python bench/p4_db_ceiling.py [--items 20000] [--concurrency 32] [--chunk-size 256]
                                  [--modes fresh,kept,reused] [--timings]

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

from common import fresh_database, mariadb, result, rules_spec, write_dataset
from p4_bare_ceiling import bare_ceiling

TARGET_RATIO = 0.5


def instant(spec, item, settings=None, **_):
    from gate.llm import CallResult
    label = "yes" if "alpha" in item["text"] else "no"
    return CallResult(decision=label, valid=True, raw_output=label, latency_ms=0, prompt_tokens=1,
                      completion_tokens=1)


def materialized(gate, mode: str, reuse: bool) -> int:
    from workers.materialize import Materializer
    uid = gate.submit(rules_spec("p1"), mode, reuse=reuse)
    materializer = Materializer(gate, threading.Event())
    while materializer.poll() == 0:
        pass
    return uid


def scored_per_second(gate, uid: int, concurrency: int, timings: bool, items: int) -> float:
    from store_timing import StoreTimer
    from workers.supervisor import run_until_terminal
    timer = StoreTimer(gate.engine) if timings else None
    server = mariadb_process()
    server_cpu, cpu, started = server_seconds(server), time.process_time(), time.monotonic()
    if timer:
        timer.__enter__()
    try:
        report, = run_until_terminal(gate, [uid], timeout=900, concurrency=concurrency, call=instant)
    finally:
        if timer:
            timer.__exit__(None, None, None)
    wall = time.monotonic() - started
    cpu, server_cpu = time.process_time() - cpu, server_seconds(server) - server_cpu
    scored = sum(r.scored for r in report.runs)
    if scored != items:
        raise RuntimeError(f"update {uid} scored {scored} of {items} items: {report.status} {report.reason}")
    reused = sum(r.reused_total for r in report.runs)
    print(f"  update {uid}: scored={scored} status={report.status} wall={wall:.2f}s rate={scored / wall:.0f} items/s"
          f"{f' reused={reused}' if reused else ''}; CPU: this process {1e6 * cpu / scored:.0f} µs/item "
          f"({100 * cpu / wall:.0f} % of a core), MariaDB {1e6 * server_cpu / scored:.0f} µs/item", flush=True)
    if timer:
        timer.print(items)
    return scored / wall


def mariadb_process():
    """The MariaDB server process of this machine, or None (psutil)."""
    import psutil
    return next((p for p in psutil.process_iter(["name"]) if p.info["name"] in ("mariadbd", "mysqld")), None)


def server_seconds(process) -> float:
    if process is None:
        return 0.0
    times = process.cpu_times()
    return times.user + times.system


def gate_rate(server_url: str, kind: str, args, n: int) -> float:
    from gate.service import Gate
    with tempfile.TemporaryDirectory() as tmp:
        url = fresh_database(server_url, f"bench_p4_{kind}_{n}")
        gate = Gate.connect(url, upgrade=True)
        gate.register_dataset("d", str(write_dataset(Path(tmp) / "d.csv", args.items)))
    gate.map_dataset("p1", "d", "0.99")
    gate = Gate(gate.engine, gate.settings.with_(chunk_size=args.chunk_size))
    print(f"{kind}:", flush=True)
    if kind == "reused":      # the check first (its answers kept), then the apply reuses every one
        scored_per_second(gate, materialized(gate, "check", True), args.concurrency, False, args.items)
    uid = materialized(gate, "apply", kind != "fresh")
    rate = scored_per_second(gate, uid, args.concurrency, args.timings, args.items)
    gate.close()
    return rate


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=20000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--chunk-size", type=int, default=256)
    ap.add_argument("--modes", default="fresh,kept,reused")
    ap.add_argument("--runs", type=int, default=1, help="runs of each (the median is judged)")
    ap.add_argument("--timings", action="store_true")
    args = ap.parse_args()
    kinds = [k.strip() for k in args.modes.split(",") if k.strip()]
    ok = True
    with mariadb() as (server_url, _):
        rates = {kind: [] for kind in kinds}
        bare = []
        for n in range(args.runs):     # alternating, so a drift of the machine falls on each alike
            bare.append(bare_ceiling(server_url, args.items, args.chunk_size, 2, f"bench_bare_{n}"))
            for kind in kinds:
                rates[kind].append(gate_rate(server_url, kind, args, n))
        ceiling = statistics.median(bare)
        print(f"bare ceiling median {ceiling:.0f} items/s ({', '.join(f'{b:.0f}' for b in bare)})")
        for kind in kinds:
            rate = statistics.median(rates[kind])
            print(f"{kind}: median {rate:.0f} items/s ({', '.join(f'{r:.0f}' for r in rates[kind])}) = "
                  f"{rate / ceiling:.3f} of the bare ceiling")
        worst = min(kinds, key=lambda k: statistics.median(rates[k]))
        ok = result(f"P4 items/s of the bare ceiling (instant model, worst of {','.join(kinds)}: {worst})",
                    statistics.median(rates[worst]) / ceiling, "x", TARGET_RATIO, higher_is_better=True)
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
