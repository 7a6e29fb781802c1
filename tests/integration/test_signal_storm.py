"""Stopping a fleet the way systemd (KillMode=control-group), ``kill -- -PGID`` and a double
Ctrl-C do: SIGTERM to the whole process group, several times, microseconds to a few ms
apart. Every stop must end, every time: a handler re-entered by the second signal must not
wait on a lock its first run holds (``workers/signals.py``)."""

from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sqlalchemy import select
from support import forkserver
from support.cli import ROOT
from support.migrated import migrated
from support.workers_harness import worker_env

from gate.domain import Gate
from gate.store.schema import worker

STORMS = 30
LANES = 2
STOP_WITHIN = 10.0
GAPS = (0.0, 0.0001, 0.0005, 0.001, 0.002, 0.004)  # seconds between two signals of a storm


def live_members(pgid: int, among: Iterable[int] | None = None) -> list[int]:
    """Processes of the group that still run (zombies waiting for init to reap them are done),
    looked for ``among`` these pids (None: every process: each a file read, which polled every
    20 ms was 40 s of the suite's CPU)."""
    alive = []
    pids = among if among is not None else (int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit())
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(pid)
    return alive


def start_fleet(env: dict, log: Path) -> subprocess.Popen | forkserver.Forked:
    """`promptgate worker --processes 2` in a process group of its own (as under systemd).
    The supervisor is forked from the preloaded server (support.forkserver: its imports,
    ~1 s of CPU a fleet, are done once); the two processes it starts are spawned by
    ``multiprocessing`` as in production, fresh interpreters. PROMPTGATE_TEST_FORK=0: the
    supervisor a fresh ``python -m gate.cli`` too."""
    argv = ["worker", "--processes", "2", "--role", "finalize,reconcile"]
    if forkserver.wanted() and not forkserver.interpreter_env_differs(env):
        return forkserver.fork_server(ROOT).spawn(argv, env, ROOT, str(log), new_session=True)
    return subprocess.Popen(
        [sys.executable, "-m", "gate.cli", *argv],
        env=env,
        cwd=ROOT,
        start_new_session=True,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


def wait_registered(gate: Gate, fleet: subprocess.Popen, n: int, timeout: float = 60.0) -> None:
    """``n`` processes of the fleet registered: each has installed its handlers (they come first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with gate.engine.connect() as conn:
            pids = set(conn.execute(select(worker.c.pid)).scalars())
        if len(live_members(fleet.pid, pids)) >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"the fleet did not start within {timeout} s")


def wait_stopped(pgid: int, began: float) -> None:
    """Until no process of the group runs or STOP_WITHIN has passed since ``began``, looking
    every 10 ms. The group's members are found among every process, then looked at by pid;
    once those have ended every process is looked at again (one started meanwhile is then
    followed in turn), so the wait ends only on a look at every process that finds none, as
    when every look was at every process (~2-5 ms of CPU each, ~50 per stop)."""
    members = live_members(pgid)
    while members and time.monotonic() - began < STOP_WITHIN:
        time.sleep(0.01)
        members = live_members(pgid, members) or live_members(pgid)


def storm(pgid: int, rng: random.Random) -> int:
    sent = 0
    for _ in range(rng.randint(3, 8)):
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            break
        sent += 1
        time.sleep(rng.choice(GAPS))
    return sent


def start_and_storm(gate: Gate, env: dict, log: Path, rng: random.Random) -> tuple[float, bool, str]:
    """One fleet started, stormed once it runs; (seconds until its last process ended,
    whether it hung, why it failed)."""
    fleet = start_fleet(env, log)
    wait_registered(gate, fleet, 2)
    time.sleep(rng.uniform(0, 0.3))  # the storm falls at any moment of the fleet's life
    began = time.monotonic()
    storm(fleet.pid, rng)
    wait_stopped(fleet.pid, began)
    took, hung = time.monotonic() - began, bool(live_members(fleet.pid))
    if hung:
        os.killpg(fleet.pid, signal.SIGKILL)
    fleet.wait(10)
    failed = "" if hung or fleet.returncode == 0 else f"exit {fleet.returncode}: {log.read_text()[-2000:]}"
    return took, hung, failed


def test_a_fleet_stops_every_time_under_sigterm_storms(mysql_url, tmp_path):
    """30 fleets, two at a time (the start-up, imports mostly, is most of the time)."""
    gate = Gate.connect(migrated(mysql_url), upgrade=True)
    env = worker_env(mysql_url, "http://127.0.0.1:9/v1", heartbeat_seconds=0.5)

    def lane(k: int) -> list[tuple[float, bool, str]]:
        rng = random.Random(18 + k)
        return [start_and_storm(gate, env, tmp_path / f"fleet-{k}-{n}.log", rng) for n in range(STORMS // LANES)]

    try:
        with ThreadPoolExecutor(LANES) as pool:
            results = [r for lane_results in pool.map(lane, range(LANES)) for r in lane_results]
    finally:
        gate.close()
    stops = [took for took, _, _ in results]
    hung = [n for n, (_, h, _) in enumerate(results) if h]
    print(
        f"{len(results)} storms: stop median {statistics.median(stops):.2f} s, max {max(stops):.2f} s; "
        f"hung: {len(hung)}"
    )
    assert len(results) == STORMS
    assert hung == [], f"{len(hung)} of {STORMS} stops never ended"
    assert max(stops) < STOP_WITHIN
    assert [f for _, _, f in results if f] == []
