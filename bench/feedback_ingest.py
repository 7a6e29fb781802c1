"""Production's feedback, ingested: 8 runtime processes (``support.runtime_process``, each a
real `PromptRuntime` through a real `promptgate serve` on a dedicated MariaDB) send a
canary rollout's outcomes at 300 events a second each (2,400 a second offered) for 20 s,
through ``PromptRuntime.feedback`` (buffered, batched). Measured: every event recorded
(counted in `rollout_feedback` and in the rollout's tally), the rate they were recorded at
(from the first event offered to the last one committed), and what it cost the database:
each on a runtime token, so every call id is one minted under the rollout's call key and
verified by the service (issue 48: two HMACs an event, no database read);
MariaDB's commits and statements (``Com_commit``, ``Questions``) per event. Target: ≥ 2,000
events/s recorded, nothing lost, and at most one commit per 20 events (batched).

    python bench/feedback_ingest.py [--processes 8] [--rate 300] [--seconds 20]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from common import gated_dataset, mariadb, model_server, result, server_status

ROLLOUT = {"canary_percent": 10, "min_feedback": 10_000_000, "max_drop": 0.02, "confidence": 0.95, "max_hours": 48}


def recorded(g, rollout_id: int) -> tuple[int, int]:
    from gate.store.feedback import count_feedback, read_raw_tally

    with g.engine.connect() as conn:
        return count_feedback(conn, rollout_id), sum(n for n, _ in read_raw_tally(conn, rollout_id).values())


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=8)
    ap.add_argument("--rate", type=float, default=300)
    ap.add_argument("--seconds", type=float, default=20)
    args = ap.parse_args()
    from support.canary import prompt_spec
    from support.runtime_process import RuntimeFleet
    from support.service_harness import Service

    from workers.supervisor import run_until_terminal

    per_process = int(args.rate * args.seconds)
    total = per_process * args.processes
    with mariadb() as (server_url, _), model_server(0) as base, tempfile.TemporaryDirectory() as tmp:
        os.environ.update(OPENAI_BASE_URL=base, OPENAI_API_KEY="bench")
        url, g = gated_dataset(server_url, "bench_feedback", tmp, 20, "0.5")
        g.set_rollout("p1", ROLLOUT)
        run_until_terminal(g, [g.submit(prompt_spec("stable"), "apply")])
        canary = g.submit(prompt_spec("canary"), "apply")
        run_until_terminal(g, [canary])
        rollout_id = g.rollout_of_update(canary)["id"]
        service = Service(url, Path(tmp))
        fleet = RuntimeFleet(Path(tmp), {"OPENAI_API_KEY": "unused"})
        try:
            for _ in range(args.processes):
                fleet.start(
                    gate_url=service.url,
                    token=service.tokens["runtime"],  # call ids under the call key, verified (issue 48)
                    prompt="p1",
                    ttl=30.0,
                    events=per_process,
                    rate=args.rate,
                )
            while not any(recorded(g, rollout_id)):  # the first batch committed: the processes are up
                time.sleep(0.05)
            before, started = server_status(g.engine, "Com_commit", "Questions"), time.monotonic() - 0.25
            while (count := recorded(g, rollout_id))[0] < total and time.monotonic() - started < args.seconds * 4:
                time.sleep(0.05)
            elapsed = time.monotonic() - started
            after = server_status(g.engine, "Com_commit", "Questions")
            stats = [fleet.finish(n) for n in range(args.processes)]
        finally:
            fleet.kill_all()
            service.stop()
            g.close()
    rows, tallied = count
    sent = sum(s.get("feedback", {}).get("sent", 0) for s in stats)
    lost = total - rows
    commits = (after["Com_commit"] - before["Com_commit"]) / max(1, rows)
    statements = (after["Questions"] - before["Questions"]) / max(1, rows)
    rate = rows / elapsed
    print(
        f"{rows:,} of {total:,} events recorded (tally {tallied:,}, sent {sent:,}, lost {lost}) from "
        f"{args.processes} processes at {args.rate:g}/s each, in {elapsed:.1f} s: {rate:,.0f} events/s"
    )
    print(f"database cost per event: {commits:.4f} commits, {statements:.3f} statements (target <= 0.05 commits)")
    ok = lost == 0 and tallied == rows and commits <= 0.05
    return result("feedback ingestion, 8 processes, nothing lost, batched", rate, "events/s", 2000, True) and ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
