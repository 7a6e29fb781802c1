"""Shared pieces of the benchmarks: a dedicated MariaDB with durable commits, the local
model server in its own process, datasets, worker processes, and the closing line.

Every benchmark prints its figure and, as its LAST line, the ratio to its target:
``RESULT <name>: <figure> (target <op> <target>) ratio <r> PASS|FAIL``.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # gate, and the tests' harness (support)

from support.mariadb_server import LocalMariaDB, create_database, running  # noqa: E402


@contextmanager
def mariadb(buffer_pool: str = "256M"):
    """A throwaway MariaDB on this machine (innodb_flush_log_at_trx_commit=1: durable), its
    InnoDB buffer pool ``buffer_pool`` (the test suite's 256M unless a bench needs its data
    in memory, as a production server would hold it)."""
    url = os.environ.get("PROMPTGATE_BENCH_MYSQL_URL")
    if url:
        yield url, None
        return
    with running(LocalMariaDB(durable=True, buffer_pool=buffer_pool)) as server:
        yield server.url(), server


def fresh_database(server_url: str, name: str) -> str:
    return create_database(server_url, name)


def gated_dataset(server_url: str, database: str, folder, items: int, bar: str = "0.99", prompts=("p1",)):
    """A fresh migrated database with dataset ``d`` of ``items`` rows gating each prompt of
    ``prompts``: returns (url, gate)."""
    from gate.domain import Gate

    url = fresh_database(server_url, database)
    gate = Gate.connect(url, upgrade=True)
    gate.register_dataset("d", str(write_dataset(Path(folder) / "d.csv", items)))
    for prompt in prompts:
        gate.map_dataset(prompt, "d", bar)
    return url, gate


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def model_server(latency_ms: float = 0, **flags):
    """`promptgate mock-llm` in its own process, so its CPU is not the workers'."""
    port = free_port()
    args = [sys.executable, "-m", "gate.cli", "mock-llm", "--port", str(port), "--latency-ms", str(latency_ms)]
    for key, value in flags.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    proc = subprocess.Popen(
        args, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("mock-llm did not start") from None
            time.sleep(0.05)
    try:
        yield base
    finally:
        proc.terminate()
        proc.wait(10)


def write_dataset(path: Path, n: int) -> Path:
    """n rows the local model server answers correctly under RULES (alpha → yes, beta → no)."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "text"])
        for i in range(n):
            w.writerow(
                [
                    f"i{i:07d}",
                    "yes" if i % 2 else "no",
                    f"{'alpha' if i % 2 else 'beta'} support ticket number {i} with a little more text",
                ]
            )
    return path


def worker_processes(db_url: str, base_url: str, n: int = 1, concurrency: int = 32, **settings):
    env = {
        **os.environ,
        "PROMPTGATE_DATABASE_URL": db_url,
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "bench",
        "PYTHONPATH": str(ROOT),
    }
    env.update({f"PROMPTGATE_{k.upper()}": str(v) for k, v in settings.items()})
    return [
        subprocess.Popen(
            [sys.executable, "-m", "gate.cli", "worker", "--concurrency", str(concurrency)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(n)
    ]


def stop(procs) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()


def wait_for_workers(gate, n: int, timeout: float = 30) -> None:
    from gate.store.workers import live_workers

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with gate.engine.connect() as conn:
            if len(live_workers(conn, 30)) >= n:
                pause_at_random_probe_phase(gate)
                return
        time.sleep(0.1)
    raise RuntimeError("workers did not register")


def fleet_args(default_items: int = 2000):
    """--items, --latency-ms, --concurrency: the arguments of a bench with one worker process."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=default_items)
    ap.add_argument("--latency-ms", type=float, default=20)
    ap.add_argument("--concurrency", type=int, default=32)
    return ap.parse_args()


@contextmanager
def one_worker_gate(database: str, args):
    """A fresh MariaDB and model server, a gated dataset of ``args.items`` rows, and one
    worker process of ``args.concurrency`` running: yields (gate, model server URL)."""
    with mariadb() as (server_url, _), model_server(args.latency_ms) as base, tempfile.TemporaryDirectory() as tmp:
        url, gate = gated_dataset(server_url, database, tmp, args.items, "0.99")
        procs = worker_processes(url, base, 1, args.concurrency)
        try:
            wait_for_workers(gate, 1)
            yield gate, base
        finally:
            stop(procs)


def pause_at_random_probe_phase(gate) -> None:
    """Let the workers settle (idle again after any earlier run), then return at a random
    moment of their probe cycle: a fixed 1 s is four 0.25 s probe intervals, which put
    every submission just after a probe (the worst pickup, every time), where real ones
    land anywhere."""
    time.sleep(1.0 + random.uniform(0, gate.settings.idle_probe_interval))


def server_status(engine, *names: str) -> dict[str, int]:
    from sqlalchemy import text

    with engine.connect() as conn:
        rows = conn.execute(text("SHOW GLOBAL STATUS")).all()
    wanted = set(names)
    return {k: int(v) for k, v in rows if k in wanted}


def result(name: str, figure: float, unit: str, target: float, higher_is_better: bool) -> bool:
    ratio = figure / target if target else float("inf")
    ok = figure >= target if higher_is_better else figure <= target
    op = ">=" if higher_is_better else "<="
    print(
        f"RESULT {name}: {figure:.4g} {unit} (target {op} {target:g}) ratio {ratio:.3f} {'PASS' if ok else 'FAIL'}",
        flush=True,
    )
    return ok


def rules_spec(name: str):
    from support.helpers import rules_spec as make

    return make(name)


def mariadb_process(port: int | None = None):
    """The MariaDB server process listening on ``port`` (the bench's own; the first one
    without), or None (psutil)."""
    import psutil

    servers = [p for p in psutil.process_iter(["name", "cmdline"]) if p.info["name"] in ("mariadbd", "mysqld")]
    return next(
        (p for p in servers if port is None or f"--port={port}" in (p.info["cmdline"] or [])),
        servers[0] if servers and port is None else None,
    )


def server_seconds(process) -> float:
    if process is None:
        return 0.0
    times = process.cpu_times()
    return times.user + times.system
