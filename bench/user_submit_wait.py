"""P1 and P2 as a user runs them: ``promptgate submit`` then ``promptgate wait`` (two CLI
processes, what a CI job runs), against the same items sent by

* P1: a bare loop of the official ``openai`` SDK, 32 calls in flight (threads), nothing
  else — the floor any tool calling this server pays; target ≤ 1.05× its wall (issue 40; 1.10× before);
* P2 (``--promptfoo``): promptfoo 0.121 ``eval --max-concurrency 32`` over the same rows
  and prompt (``make bench`` installs it from npm into .cache/promptfoo); target: the gate
  ≥ 2.3× faster in every run.

1,000 items, the local model server at 200 ms, the gate's workers two processes of 16 calls
in flight, already running (a fleet is). Each round runs every contender once on the same
server, in turn (the order rotates), with fresh calls (``--no-reuse``: no answer kept from
an earlier round stands in for a call). The wall of each is from its first process's start
to its last process's exit.

    python bench/user_submit_wait.py [--items 1000] [--latency-ms 200] [--rounds 3] [--promptfoo]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from datetime import UTC
from pathlib import Path

from common import (
    ROOT,
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

PROMPTFOO = ROOT / ".cache" / "promptfoo" / "node_modules" / ".bin" / "promptfoo"
P1_TARGET, P2_TARGET = 1.05, 2.3  # issue 40: P1 within 5 % of the bare SDK loop


def rows(dataset: Path) -> list[dict]:
    with dataset.open() as fh:
        return list(csv.DictReader(fh))


def messages_of(spec, row: dict) -> list[dict]:
    from gate.calls.llm import render_messages

    return render_messages(spec, {"text": row["text"]})


def bare_sdk(base_url: str, spec, items: list[dict], concurrency: int) -> float:
    """The official SDK, one client, ``concurrency`` threads, every item once: seconds."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0)
    requests = [messages_of(spec, row) for row in items]
    started = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        answers = list(
            pool.map(lambda m: client.chat.completions.create(model=spec.model, messages=m, temperature=0), requests)
        )
    wall = time.monotonic() - started
    assert len(answers) == len(items)
    return wall


def cli(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gate.cli", *args], env=env, capture_output=True, text=True)


def gate_as_user(env: dict, prompt_file: Path, gate) -> float:
    """``promptgate submit FILE --mode apply --no-reuse`` then ``promptgate wait ID``, each
    its own process (the console script's module), on the database or through the service
    (``env``): seconds from the first's start to the second's exit. Prints where they went
    (the update's times are the database's clock: this machine's)."""
    began, started = time.time(), time.monotonic()
    submitted = cli(["submit", str(prompt_file), "--mode", "apply", "--no-reuse"], env)
    submit_exit = time.monotonic() - started
    if submitted.returncode:
        raise RuntimeError(f"submit failed: {submitted.stderr.strip()}")
    uid = int(submitted.stdout.strip())
    waited = cli(["wait", str(uid), "--no-progress"], env)
    wall = time.monotonic() - started
    if waited.returncode:
        raise RuntimeError(f"wait exited {waited.returncode}: {waited.stdout.strip()} {waited.stderr.strip()}")
    print("    " + phases(gate, uid, began, submit_exit, wall), flush=True)
    return wall


def phases(gate, uid: int, began: float, submit_exit: float, wall: float) -> str:

    from gate.store.runs import get_run

    report = gate.status(uid)
    with gate.engine.connect() as conn:
        run = get_run(conn, report.runs[0].run_id)
    at = lambda t: t.replace(tzinfo=UTC).timestamp() - began  # noqa: E731
    u = report.update
    return (
        f"update {uid}: committed {at(u.created_at):.2f} s, submit exited {submit_exit:.2f}, run started "
        f"(pickup) {at(run.started_at):.2f}, materialized {at(run.materialized_at):.2f}, run finished "
        f"{at(run.finished_at):.2f}, update finished {at(u.finished_at):.2f}, wait exited {wall:.2f}"
    )


@contextmanager
def service(db_url: str, folder: Path):
    """``promptgate serve`` on a free port and an admin token (an apply is submitted):
    the environment a CI job has for it."""
    from support.service_harness import Service

    served = Service(db_url, folder)
    try:
        yield {
            **os.environ,
            "PROMPTGATE_URL": served.url,
            "PROMPTGATE_TOKEN": served.tokens["admin"],
            "PYTHONPATH": str(ROOT),
        }
    finally:
        served.stop()


def promptfoo_config(folder: Path, base_url: str, spec, items: list[dict]) -> Path:
    """The same prompt and rows as a promptfoo eval: an OpenAI-compatible provider at the
    local server, one test per row asserting the expected label."""
    system, user = spec.messages[0].content, "{{text}}"
    prompt = folder / "prompt.json"
    prompt.write_text(json.dumps([{"role": "system", "content": system}, {"role": "user", "content": user}]))
    tests = [
        {"vars": {"text": row["text"]}, "assert": [{"type": "icontains", "value": row["expected_decision"]}]}
        for row in items
    ]
    config = {
        "prompts": [f"file://{prompt}"],
        "providers": [
            {"id": f"openai:chat:{spec.model}", "config": {"apiBaseUrl": base_url, "apiKey": "bench", "temperature": 0}}
        ],
        "tests": tests,
    }
    path = folder / "promptfooconfig.json"
    path.write_text(json.dumps(config))
    return path


def promptfoo(config: Path, folder: Path, concurrency: int) -> float:
    env = {
        **os.environ,
        "PROMPTFOO_DISABLE_TELEMETRY": "1",
        "PROMPTFOO_DISABLE_UPDATE": "1",
        "PROMPTFOO_CONFIG_DIR": str(folder / "home"),
        "PROMPTFOO_CACHE_ENABLED": "false",
        "PROMPTFOO_DISABLE_SHARING": "1",
        "NO_COLOR": "1",
    }
    started = time.monotonic()
    done = subprocess.run(
        [
            str(PROMPTFOO),
            "eval",
            "-c",
            str(config),
            "--max-concurrency",
            str(concurrency),
            "--no-cache",
            "--no-write",
            "--no-table",
            "--no-progress-bar",
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - started
    if done.returncode not in (0, 100):
        raise RuntimeError(f"promptfoo exited {done.returncode}: {done.stderr[-2000:]}")
    print(
        "  promptfoo: "
        + " | ".join(
            line.strip() for line in done.stdout.splitlines() if re.search(r"(?i)pass|fail|error|success", line)
        )[-300:],
        flush=True,
    )
    return wall


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--latency-ms", type=float, default=200)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--promptfoo", action="store_true", help="P2: promptfoo eval in each round too")
    ap.add_argument(
        "--via",
        choices=["service", "database", "both"],
        default="both",
        help="the CLI through `promptgate serve` (the recommended setup) or on the database",
    )
    args = ap.parse_args()
    if args.promptfoo and not PROMPTFOO.exists():
        raise SystemExit(f"{PROMPTFOO} is missing: make bench installs promptfoo 0.121 there")
    import yaml

    spec = rules_spec("p1")
    vias = ["service", "database"] if args.via == "both" else [args.via]
    walls: dict[str, list[float]] = {
        "sdk": [],
        **{f"gate ({via})": [] for via in vias},
        **({"promptfoo": []} if args.promptfoo else {}),
    }
    with mariadb() as (server_url, _), model_server(args.latency_ms) as base, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url, gate = gated_dataset(server_url, "bench_p1_users", folder, args.items, "0.99")
        items = rows(folder / "d.csv")
        prompt_file = folder / "p1.yaml"
        prompt_file.write_text(yaml.safe_dump(spec.to_config()))
        pf_config = promptfoo_config(folder, base, spec, items) if args.promptfoo else None
        procs = worker_processes(url, base, 2, args.concurrency // 2)
        served = service(url, folder) if "service" in vias else nullcontext({})
        db_env = {**os.environ, "PROMPTGATE_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
        try:
            with served as service_env:
                envs = {"gate (service)": service_env, "gate (database)": db_env}
                wait_for_workers(gate, 2)
                bare_sdk(base, spec, items[:64], args.concurrency)  # the SDK's imports and first connections
                for n in range(args.rounds):
                    order = list(walls)[n % len(walls) :] + list(walls)[: n % len(walls)]
                    for who in order:
                        if who in envs:
                            pause_at_random_probe_phase(gate)
                            walls[who].append(gate_as_user(envs[who], prompt_file, gate))
                        elif who == "sdk":
                            walls[who].append(bare_sdk(base, spec, items, args.concurrency))
                        else:
                            walls[who].append(promptfoo(pf_config, folder, args.concurrency))
                    print(f"round {n + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in walls.items()), flush=True)
        finally:
            stop(procs)
    ok = True
    for via in vias:
        gate_walls = walls[f"gate ({via})"]
        ratios = [g / s for g, s in zip(gate_walls, walls["sdk"])]
        print(
            f"P1 as a user, {via}: submit + wait {', '.join(f'{w:.2f}' for w in gate_walls)} s vs the bare SDK "
            f"{', '.join(f'{w:.2f}' for w in walls['sdk'])} s: {', '.join(f'{r:.3f}' for r in ratios)}x"
        )
        if args.promptfoo:
            speedups = [p / g for p, g in zip(walls["promptfoo"], gate_walls)]
            print(
                f"P2, {via}: promptfoo {', '.join(f'{w:.2f}' for w in walls['promptfoo'])} s; the gate "
                f"{', '.join(f'{r:.2f}' for r in speedups)}x faster"
            )
            ok &= result(
                f"P2 promptfoo wall / gate submit+wait wall ({via}, worst round)",
                min(speedups),
                "x",
                P2_TARGET,
                higher_is_better=True,
            )
        ok &= result(
            f"P1 as a user ({via}): submit + wait / bare SDK loop (median of rounds)",
            statistics.median(ratios),
            "x",
            P1_TARGET,
            higher_is_better=False,
        )
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
