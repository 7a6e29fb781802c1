"""`make bench`: every benchmark in turn, each in its own process; a summary of their
RESULT lines at the end. Exit 1 if any target is missed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = [
    ["submit_to_verdict.py"],
    ["submit_to_verdict.py", "--template", "filtered"],
    ["judged_run.py"],
    ["commits_per_item.py"],
    ["db_ceiling.py"],
    ["pickup_idle.py"],
    ["materialize.py"],
    ["ratelimit.py"],
    ["reuse.py"],
    ["service_waiters.py"],
    ["service_submit.py"],
    ["cli_start.py"],
    ["db_bare_ceiling.py"],
    ["user_submit_wait.py", "--promptfoo"],
    ["million_rows.py"],
    ["connect_cost.py"],
    ["runtime_decide.py"],
    ["feedback_ingest.py"],
    ["rollback_latency.py"],
    ["action_job.py"],
    ["rollout_power.py"],
]


def main() -> int:
    results, failed = [], False
    for script, *args in BENCHES:
        if not (HERE / script).exists():
            continue
        name = " ".join([script, *args])
        print(f"== {name}", flush=True)
        proc = subprocess.run(
            [sys.executable, str(HERE / script), *args],
            cwd=HERE,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        print(proc.stdout, end="", flush=True)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
        results.append(f"{name}: {lines[-1] if lines else f'no RESULT line (exit {proc.returncode})'}")
        failed |= proc.returncode != 0
    print("\n== summary")
    print("\n".join(results))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
