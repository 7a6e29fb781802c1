"""`promptgate worker --processes N` forks its worker processes from one fork server that
imported their modules once (workers/fork_server.py): a process restarted after a crash is
a fork, not a new interpreter importing the openai SDK again; and a SIGTERM sent to the
whole process group leaves the fork server running, so the supervisor still learns its
workers' exits and waits for them to drain."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from sqlalchemy import select
from support.canary import wait_until
from support.cli import ROOT
from support.migrated import migrated
from support.workers_harness import worker_env

from gate.domain import Gate
from gate.store.schema import worker

RESTARTED_CPU = 0.3  # seconds: a fork's start; a new interpreter's imports cost ~0.8-1 s


def worker_pids(gate: Gate) -> set[int]:
    with gate.engine.connect() as conn:
        return {int(pid) for (pid,) in conn.execute(select(worker.c.pid))}


def two_or_none(pids: set[int]) -> set[int] | None:
    return pids if len(pids) == 2 else None


def own_cpu(pid: int) -> float:
    """CPU seconds the process itself spent since it began (a fork starts at zero)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def fleet_of_two(mysql_url, tmp_path):
    """`promptgate worker --processes 2` in a process group of its own (a stop can be sent to it
    whole), once both its worker processes have registered: (gate, supervisor, their pids)."""
    url = migrated(mysql_url)
    gate = Gate.connect(url)
    log = open(tmp_path / "worker.log", "wb")
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "gate.cli", "-v", "worker", "--role", "all", "--processes", "2"],
        env=worker_env(url, "http://127.0.0.1:9/v1"),
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        first = wait_until(lambda: two_or_none(worker_pids(gate)), 30, "two worker processes", poll=0.05)
        yield gate, supervisor, first
    finally:
        if supervisor.poll() is None:
            os.killpg(supervisor.pid, signal.SIGKILL)
            supervisor.wait()
        log.close()
        gate.close()


def test_a_worker_process_restarted_after_a_crash_is_a_fork_of_the_preloaded_server(fleet_of_two):
    gate, supervisor, first = fleet_of_two
    started = {pid: own_cpu(pid) for pid in first}
    os.kill(min(first), signal.SIGKILL)
    new = wait_until(lambda: worker_pids(gate) - first, 30, "the killed worker process restarted", poll=0.05)
    (restarted,) = new
    cpu = own_cpu(restarted)
    print(f"CPU up to registration: restarted {cpu:.3f} s, first two {sorted(started.values())}")
    assert cpu < RESTARTED_CPU, (
        f"the restarted worker process spent {cpu:.2f} s of CPU up to its registration (the first two: "
        f"{', '.join(f'{c:.2f}' for c in started.values())} s): a new interpreter importing a worker's "
        "modules, not a fork of the preloaded server"
    )
    # a stop sent to the whole group, as systemd's KillMode=control-group sends it: the
    # supervisor exits only once its workers have (it learns their exits through the fork server)
    workers = (first - {min(first)}) | new
    os.killpg(supervisor.pid, signal.SIGTERM)
    supervisor.wait(30)
    still = [pid for pid in workers if alive(pid)]
    assert still == [], f"the supervisor exited while worker processes {still} still ran"


def test_workers_whose_fork_server_is_killed_stop_and_the_supervisor_replaces_them(fleet_of_two):
    """No worker runs on unsupervised: the fork server killed (the OOM killer, a kill -9), its
    workers are told (PR_SET_PDEATHSIG) and drain; the supervisor starts a new fork server and
    as many workers."""
    gate, supervisor, first = fleet_of_two
    server = parent_of(min(first))
    assert server != supervisor.pid and {parent_of(pid) for pid in first} == {server}
    os.kill(server, signal.SIGKILL)
    wait_until(
        lambda: not [pid for pid in first if alive(pid)],
        15,
        "the workers of the killed fork server to stop (they ran on, unsupervised)",
        poll=0.05,
    )
    new = wait_until(lambda: two_or_none(worker_pids(gate) - first), 30, "two new worker processes", poll=0.05)
    assert supervisor.poll() is None and all(alive(pid) for pid in new)
