"""P10: a million rows. A 1,000,000-row CSV imported as a dataset version, then a default
submit (answers reused where kept, every new answer kept) materialized and scored with an
instant model by ONE worker process (every role), on one MariaDB (durable commits).

Printed: the phases (import, materialize, scoring, total), the scoring rate in each tenth
of the run (a rate that falls as the run grows means a per-chunk cost that grows with the
rows already scored), the worker's peak RSS against the same run at ``--baseline`` rows,
EXPLAIN of the claim queries at the end (a range of an index, no filesort), then ``prune``
of the run's rows and its kept answers in bounded batches, timed.

    python bench/million_rows.py [--items 1000000] [--baseline 100000] [--chunk-size 256]

Targets: import + materialize + score ≤ 180 s; the last tenth's rate ≥ 0.8 of the first
tenth's after warm-up (the second); peak RSS ≤ 1.2× the baseline run's; claim plans use an
index with no filesort. The LAST line is the total time's RESULT.
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from pathlib import Path

from common import fresh_database, mariadb, result, rules_spec, write_dataset

TARGET_SECONDS = 180.0


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


def worker(url: str, chunk_size: int, concurrency: int, uid: int, progress, timings: bool = False) -> None:
    """One worker process of every role until update ``uid`` ends; reports (seconds since
    start, items written, and with ``timings`` the store calls' totals so far) every second
    and its peak RSS at the end."""
    import resource
    import threading

    from store_timing import StoreTimer

    from gate.domain import Gate
    from workers.supervisor import ROLES, WorkerProcess

    gate = Gate.connect(url)
    gate = Gate(gate.engine, gate.settings.with_(chunk_size=chunk_size))
    timer = StoreTimer(gate.engine).__enter__() if timings else None
    process = WorkerProcess(gate.engine, gate.settings, ROLES, concurrency, instant).start()
    executor = next(p for p in process.pollers if p.role == "execute")
    stop = threading.Event()

    def report() -> None:
        while not stop.wait(1.0):
            calls = {k: tuple(v) for k, v in timer.calls.items()} if timer else None
            progress.put(("written", time.monotonic(), executor.stats["written"], calls))

    threading.Thread(target=report, daemon=True).start()
    try:
        gate.wait(uid, timeout=3600, poll=0.2)
    finally:
        stop.set()
        process.shutdown()
    progress.put(("rss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def one_run(server_url: str, items: int, args, name: str) -> dict:
    from gate.domain import Gate
    from gate.store.runs import runs_of_update

    url = fresh_database(server_url, name)
    gate = Gate.connect(url, upgrade=True)
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = write_dataset(Path(tmp) / "d.csv", items)
        started = time.monotonic()
        gate.register_dataset("d", str(csv_path))
        imported = time.monotonic() - started
    gate.map_dataset("p1", "d", "0.99")
    ctx = multiprocessing.get_context("fork")
    progress = ctx.Queue()
    uid = gate.submit(rules_spec("p1"), "check")  # the default submit: a check, reuse on
    begun = time.monotonic()
    child = ctx.Process(target=worker, args=(url, args.chunk_size, args.concurrency, uid, progress, args.timings))
    child.start()
    materialized_at = None
    while materialized_at is None:
        with gate.engine.connect() as conn:
            run = runs_of_update(conn, uid)[0]
        if run.materialized_at is not None:
            materialized_at = time.monotonic()
        time.sleep(0.2)
    report = gate.wait(uid, timeout=3600, poll=0.2)
    finished = time.monotonic()
    child.join(120)
    samples, rss = [], None
    while not progress.empty():
        kind, *values = progress.get()
        if kind == "written":
            samples.append(values)
        else:
            rss = values[0]
    scored = sum(r.scored for r in report.runs)
    out = {
        "url": url,
        "gate": gate,
        "uid": uid,
        "run_id": run.id,
        "items": items,
        "import": imported,
        "materialize": materialized_at - begun,
        "score": finished - begun,
        "status": report.status,
        "scored": scored,
        "samples": samples,
        "rss": rss,
    }
    print(
        f"{items:,} rows: import {imported:.1f} s ({items / imported:,.0f} rows/s); submit → last page "
        f"materialized {out['materialize']:.1f} s; submit → {report.status} {out['score']:.1f} s "
        f"({scored / out['score']:,.0f} items/s); total {imported + out['score']:.1f} s; worker peak RSS "
        f"{rss:.0f} MiB",
        flush=True,
    )
    return out


def tenths(samples: list, items: int) -> list[float]:
    """Items per second over each tenth of the items written."""
    rates, mark = [], 0
    start_t, start_n = None, 0
    for t, n, *_ in samples:
        if start_t is None:
            start_t, start_n = t, n
            continue
        if n >= (mark + 1) * items / 10:
            rates.append((n - start_n) / (t - start_t))
            start_t, start_n, mark = t, n, mark + 1
    return rates


def window_timings(samples: list, items: int) -> None:
    """ms per call of the busiest store calls and transactions in the second tenth of the
    run and in the last: a call whose cost grows with the rows already scored shows here."""

    def at(fraction):
        return next(s for s in samples if s[1] >= fraction * items)

    windows = {"2nd tenth": (at(0.1), at(0.2)), "last tenth": (at(0.9), samples[-1])}
    names = sorted(samples[-1][2], key=lambda k: -samples[-1][2][k][1])[:12]
    print(f"  {'call':<44} " + "  ".join(f"{w + ' ms/call':>22}" for w in windows))
    for name in names:
        cells = []
        for start, end in windows.values():
            n0, t0 = (start[2] or {}).get(name, (0, 0.0))
            n1, t1 = (end[2] or {}).get(name, (0, 0.0))
            cells.append(f"{1000 * (t1 - t0) / (n1 - n0):>14.2f} ({n1 - n0:>5})" if n1 > n0 else f"{'-':>22}")
        print(f"  {name:<44} " + "  ".join(cells))


def explain_claims(gate, run_id: int) -> bool:
    """EXPLAIN of the claim queries on the full tables: each should read a range of an index
    with no filesort. Returns whether they all do."""
    from gate.states import RunStatus
    from gate.store.item_claims import item_claim_from_sql
    from gate.store.items import item_claim_query
    from gate.store.runs import finalize_candidates_query, materialize_claim_query

    statements = {
        "item claim from a position": item_claim_from_sql(run_id, 500_000, 256),
        "item claim": item_claim_query(run_id, 256, 5),
        "materialize claim": materialize_claim_query(RunStatus.PENDING, 1),
        "finalize candidates": finalize_candidates_query(20),
    }
    ok = True
    with gate.engine.connect() as conn:
        for name, stmt in statements.items():
            sql = (
                stmt
                if isinstance(stmt, str)
                else str(stmt.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
            )
            rows = conn.exec_driver_sql("EXPLAIN " + sql).mappings().all()
            for row in rows:
                extra = row.get("Extra") or ""
                good = row.get("key") is not None and "filesort" not in extra
                ok &= good or row.get("table") is None
                print(
                    f"  EXPLAIN {name}: table={row.get('table')} type={row.get('type')} key={row.get('key')} "
                    f"rows={row.get('rows')} extra={extra!r} {'ok' if good else 'NOT AN INDEX RANGE'}"
                )
    return ok


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--baseline", type=int, default=100_000)
    ap.add_argument("--chunk-size", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--timings", action="store_true", help="store calls' cost early and late in the run")
    ap.add_argument(
        "--buffer-pool",
        default="2G",
        help="the server's InnoDB buffer pool: a million items, their "
        "dataset rows and answers are ~0.8 GB, which a server sized for them holds in memory",
    )
    args = ap.parse_args()
    with mariadb(args.buffer_pool) as (server_url, _):
        base = one_run(server_url, args.baseline, args, "bench_p10_base")
        big = one_run(server_url, args.items, args, "bench_p10")
        rates = tenths(big["samples"], args.items)
        if args.timings:
            window_timings(big["samples"], args.items)
        print("scoring rate by tenth of the run (items/s): " + ", ".join(f"{r:,.0f}" for r in rates))
        steady = len(rates) >= 3 and rates[-1] >= 0.8 * rates[1]
        print(
            f"the rate {'holds' if steady else 'FALLS'} with size: last tenth {rates[-1]:,.0f} vs second "
            f"{rates[1]:,.0f} items/s"
            if len(rates) >= 3
            else "too few samples to judge the rate"
        )
        rss_ratio = big["rss"] / base["rss"]
        print(
            f"peak RSS {big['rss']:.0f} MiB vs {base['rss']:.0f} MiB at {args.baseline:,} rows: {rss_ratio:.2f}× "
            f"({'within' if rss_ratio <= 1.2 else 'OVER'} 1.2×)"
        )
        plans = explain_claims(big["gate"], big["run_id"])
        started = time.monotonic()
        pruned = big["gate"].prune(0)
        print(
            f"prune of the run's rows: {pruned.items:,} items, {pruned.answers:,} answers, {pruned.versions} "
            f"versions in {time.monotonic() - started:.1f} s (batches of the default size)"
        )
        total = big["import"] + big["score"]
        ok = result(
            "P10 a million rows: import + materialize + score", total, "s", TARGET_SECONDS, higher_is_better=False
        )
        return ok and steady and rss_ratio <= 1.2 and plans and big["status"] == "PASSED"


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
