"""P4 database ceiling: with an in-process model that answers instantly, items scored per
second by the workers on this machine with MariaDB on the same machine (durable commits).
Target: ≥ 3,000 items/s.

    python bench/p4_db_ceiling.py [--items 20000] [--concurrency 32] [--chunk-size 256]

With an instant model nothing waits on calls, so the chunk is what amortizes the claim
and write-back commits: 256 here (PROMPTGATE_CHUNK_SIZE; the default 32 suits calls of
~100 ms and more, where chunks of the size of the calls in flight keep latency low).
"""

from __future__ import annotations

import argparse
import tempfile
import time

from common import gated_dataset, mariadb, result, rules_spec


def instant(spec, item, settings=None, **_):
    from gate.llm import CallResult
    label = "yes" if "alpha" in item["text"] else "no"
    return CallResult(decision=label, valid=True, raw_output=label, latency_ms=0, prompt_tokens=1,
                      completion_tokens=1)


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=20000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--chunk-size", type=int, default=256)
    args = ap.parse_args()
    from gate.service import Gate
    from workers.supervisor import run_until_terminal
    with mariadb() as (server_url, _), tempfile.TemporaryDirectory() as tmp:
        url, gate = gated_dataset(server_url, "bench_p4", tmp, args.items, "0.99")
        gate = Gate(gate.engine, gate.settings.with_(chunk_size=args.chunk_size))
        # materialize first, so the figure is the scoring rate (P4 is about claims and write-backs)
        uid = gate.submit(rules_spec("p1"), "apply", reuse=False)
        from workers.materialize import Materializer
        import threading
        materializer = Materializer(gate, threading.Event())
        while materializer.poll() == 0:
            pass
        started = time.monotonic()
        report, = run_until_terminal(gate, [uid], timeout=600, concurrency=args.concurrency, call=instant)
        wall = time.monotonic() - started
        scored = sum(r.scored for r in report.runs)
        print(f"items={args.items} chunk={args.chunk_size} in_flight={args.concurrency} scored={scored} "
              f"status={report.status} wall={wall:.2f}s")
        return result("P4 items scored per second (instant model)", scored / wall, "items/s", 3000,
                      higher_is_better=True)


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
