"""Model calls per merged change: a pull request's check, then the apply on merge with
nothing changed in between, counted at the model server (its ``/stats``). The apply
reuses every answer the check paid for. Target: ≤ 1.0 × the dataset's size. Also prints
how long the apply takes against the check (no calls: materialize, look up, write back).

    python bench/reuse.py [--items 2000] [--latency-ms 20] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import urllib.request

from common import gated_dataset, mariadb, model_server, result, rules_spec, stop, wait_for_workers, worker_processes


def calls(base_url: str) -> int:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=10) as resp:
        return json.load(resp)["requests"]


def evaluate(gate, mode: str) -> float:
    started = time.monotonic()
    uid = gate.submit(rules_spec("p1"), mode)
    report = gate.wait(uid, timeout=300, poll=0.05)
    assert report.status in ("PASSED", "APPLIED"), report.update.reason
    return time.monotonic() - started


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--latency-ms", type=float, default=20)
    ap.add_argument("--concurrency", type=int, default=32)
    args = ap.parse_args()
    with mariadb() as (server_url, _), model_server(args.latency_ms) as base, \
            tempfile.TemporaryDirectory() as tmp:
        url, gate = gated_dataset(server_url, "bench_reuse", tmp, args.items, "0.99")
        procs = worker_processes(url, base, 1, args.concurrency)
        try:
            wait_for_workers(gate, 1)
            check_wall = evaluate(gate, "check")
            after_check = calls(base)
            apply_wall = evaluate(gate, "apply")
            total = calls(base)
        finally:
            stop(procs)
    print(f"items={args.items} check: {after_check} calls in {check_wall:.2f}s; apply after merge: "
          f"{total - after_check} calls in {apply_wall:.2f}s ({apply_wall / check_wall:.2f}x the check's wall)")
    return result("model calls per merged change / dataset size", total / args.items, "x", 1.0,
                  higher_is_better=False)


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
