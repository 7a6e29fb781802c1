"""Model calls per merged change: a pull request's check, then the apply on merge with
nothing changed in between, counted at the model server (its ``/stats``). The apply
reuses every answer the check paid for. Target: ≤ 1.0 × the dataset's size. Also prints
how long the apply takes against the check (no calls: materialize, look up, write back).

    python bench/reuse.py [--items 2000] [--latency-ms 20] [--concurrency 32]
"""

from __future__ import annotations

import json
import time
import urllib.request

from common import fleet_args, one_worker_gate, result, rules_spec


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
    args = fleet_args()
    with one_worker_gate("bench_reuse", args) as (gate, base):
        check_wall = evaluate(gate, "check")
        after_check = calls(base)
        apply_wall = evaluate(gate, "apply")
        total = calls(base)
    print(
        f"items={args.items} check: {after_check} calls in {check_wall:.2f}s; apply after merge: "
        f"{total - after_check} calls in {apply_wall:.2f}s ({apply_wall / check_wall:.2f}x the check's wall)"
    )
    return result("model calls per merged change / dataset size", total / args.items, "x", 1.0, higher_is_better=False)


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
