"""Wakes instead of polls (issue 51.5), on MariaDB with a real `promptgate serve` and real
`promptgate worker` processes whose idle probe comes only every 600 s (a probe waiting for
a knock in its statement asks again every 5 s at most):

* a submission, through the service or on the database as the CLI makes it, knocks on the
  idle probes (KILL QUERY of the statements carrying the probe's tag), and the idle worker
  picks it up within a second, not at its next probe; a knock wakes the probes of its own
  database only and interrupts no other statement;
* the service's status watcher, beating every 5 s, quickens near an update's end: a waiter
  wakes within a fraction of a second of the end, not at the next beat.

(An idle worker's cost and its pickup: bench/pickup_idle.py.)"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from contextlib import contextmanager

import pytest
import yaml
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool
from support.helpers import rules_spec, write_rule_rows
from support.mariadb_server import create_database
from support.migrated import migrated
from support.service_harness import Service
from support.workers_harness import WorkerFleet, worker_env

from gate.domain import Gate
from gate.mockllm import MockLLMServer
from gate.service.watcher import StatusWatcher
from gate.states import UPDATE_TERMINAL
from gate.store.runs import get_run
from gate.store.updates import update_status
from gate.store.wake import KNOCKED, QUIET, knock, probe_or_wait
from gate.store.workers import live_workers

PROBE_SECONDS = 600.0  # the worker's idle probe: far longer than any pickup asserted here


@contextmanager
def idle_fleet(server_url: str, name: str, folder):
    """One idle worker process (probe every 600 s, 4 calls in flight) and a model answering
    in 0.4 s, on a database of its own with dataset d1 (8 rows) gating p1: (url, gate, fleet)."""
    url = migrated(create_database(server_url, f"{name}_{os.getpid()}"))
    gate = Gate.connect(url)
    gate.register_dataset("d1", str(write_rule_rows(folder / "d1.csv", 8)))
    gate.map_dataset("p1", "d1", "0.5")
    with MockLLMServer(latency_ms=400) as llm:
        fleet = WorkerFleet(worker_env(url, llm.base_url, idle_probe_interval=PROBE_SECONDS, concurrency=4), folder)
        fleet.start(1)
        try:
            deadline = time.monotonic() + 30
            while not _live(gate):
                assert time.monotonic() < deadline, "the worker did not register"
                time.sleep(0.1)
            time.sleep(1.0)  # its warm-up polls done: idle, its probe waiting
            yield url, gate, fleet
        finally:
            fleet.stop_all()
            gate.close()


@pytest.fixture(scope="module")
def stack(mysql_server, tmp_path_factory):
    """A service beside an idle fleet (``idle_fleet``)."""
    folder = tmp_path_factory.mktemp("wake")
    with idle_fleet(mysql_server[0], "pg_wake", folder) as (url, gate, _):
        service = Service(url, folder)
        try:
            yield service, gate
        finally:
            service.stop()


def _live(gate) -> bool:
    with gate.engine.connect() as conn:
        return bool(live_workers(conn, 30))


def _submit(client, key: str) -> int:
    posted = client.post(
        "/v1/updates", json={"prompt": rules_spec("p1").to_config(), "mode": "check", "source_key": key}
    )
    assert posted.status_code == 202, posted.text
    return posted.json()["id"]


def _claimed_after(gate, update_id: int, since: float, limit: float) -> float:
    """Seconds from ``since`` until the update's run is claimed (``limit`` at most)."""
    run_id = gate.status(update_id).runs[0].run_id
    while time.monotonic() - since < limit:
        with gate.engine.connect() as conn:
            if get_run(conn, run_id).attempt > 0:
                break
        time.sleep(0.01)
    return time.monotonic() - since


def _ended_at(gate, update_id: int, limit: float = 30.0) -> float:
    deadline = time.monotonic() + limit
    with gate.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        while update_status(conn, update_id) not in UPDATE_TERMINAL:
            assert time.monotonic() < deadline, f"update {update_id} did not end"
            time.sleep(0.005)
    return time.monotonic()


def test_a_submission_through_the_service_wakes_the_idle_fleet(stack):
    """Without a knock the worker's first probe falls anywhere in its first 600 s: the knock,
    not a probe, picks this up (a listening probe asks again every 5 s at most). Only the
    first submission tells: after a run, a process keeps polling for an interval."""
    service, gate = stack
    with service.client("submit") as client:
        posted = time.monotonic()
        update_id = _submit(client, "pickup")
        pickup = _claimed_after(gate, update_id, posted, 5.0)
        assert pickup < 3.0, f"picked up {pickup:.2f} s after its submission (a probe every {PROBE_SECONDS:.0f} s)"
        waited = client.get(f"/v1/updates/{update_id}/wait", params={"timeout": 30})
    assert waited.status_code == 200 and waited.json()["status"] == "PASSED", waited.text


def test_a_submission_on_the_database_wakes_the_idle_fleet(mysql_server, tmp_path):
    """The CLI's path (``Gate.submit`` on the database, no service anywhere): its knock after
    the commit, not the worker's next probe (600 s away), picks the submission up."""
    with idle_fleet(mysql_server[0], "pg_wake_db", tmp_path) as (_, gate, fleet):
        began = time.monotonic()
        update_id = gate.submit(rules_spec("p1"), "check")
        pickup = _claimed_after(gate, update_id, began, 5.0)
        assert pickup < 3.0, f"picked up {pickup:.2f} s after its submission (a probe every {PROBE_SECONDS:.0f} s)"
        gate.wait(update_id, timeout=30)


def test_an_idle_worker_asked_to_stop_ends_its_waiting_probe(mysql_server, tmp_path):
    """An idle worker's probe waits in its statement (up to 5 s with a 600 s interval): on
    SIGTERM the process interrupts its own probe and drains at once, not at the wait's end."""
    with idle_fleet(mysql_server[0], "pg_wake_stop", tmp_path) as (_, gate, fleet):
        (proc,) = fleet.procs
        began = time.monotonic()
        proc.terminate()
        proc.wait(30)
        took = time.monotonic() - began
    assert proc.returncode == 0 and took < 2.0, f"exit {proc.returncode} {took:.2f} s after SIGTERM"


def test_a_knock_wakes_its_own_databases_probes_and_interrupts_nothing_else(mysql_server):
    """Two databases' idle probes and, on the first, a statement whose value holds the tag's
    words (PyMySQL sends values in the statement's text: a model's answer, a dataset's row): a
    knock on the first interrupts its probe only; the other database's probe and that
    statement run out their time."""
    urls = [migrated(create_database(mysql_server[0], f"pg_knock_{i}_{os.getpid()}")) for i in (1, 2)]
    engines = [create_engine(u, poolclass=NullPool) for u in urls]
    heard: dict[str, object] = {}

    def waiting(key: str, engine, statement) -> None:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            began = time.monotonic()
            heard[key] = (statement(conn), round(time.monotonic() - began, 1))

    def untagged(conn):  # a statement holding the tag's words in a value (an answer, a row): no probe
        return conn.execute(text("SELECT SLEEP(1.5), 'an answer: promptgate idle probe'")).scalar()

    threads = [
        threading.Thread(target=waiting, args=("mine", engines[0], lambda c: probe_or_wait(c, 1.5))),
        threading.Thread(target=waiting, args=("theirs", engines[1], lambda c: probe_or_wait(c, 1.5))),
        threading.Thread(target=waiting, args=("untagged", engines[0], untagged)),
    ]
    try:
        for t in threads:
            t.start()
        time.sleep(0.4)
        with engines[0].connect() as conn:
            assert knock(conn) == 1
        for t in threads:
            t.join(10)
    finally:
        for e in engines:
            e.dispose()
    assert heard["mine"][0] == KNOCKED and heard["mine"][1] < 1.0, heard
    assert heard["theirs"] == (QUIET, 1.5) and heard["untagged"] == (0, 1.5), heard


def test_a_waiter_wakes_at_the_end_of_its_update_not_at_the_next_beat(stack):
    """The watcher beats every 5 s; the update is near its end (8 items, 4 in flight) from
    the first beat: the beat quickens and the waiter wakes right after the end."""
    service, gate = stack
    with service.client("submit") as client:
        update_id = _submit(client, "end")
    run_id = gate.status(update_id).runs[0].run_id
    deadline = time.monotonic() + 10
    while True:  # materialized: the calls are in flight
        with gate.engine.connect() as conn:
            if get_run(conn, run_id).materialized_at is not None:
                break
        assert time.monotonic() < deadline, "the run was not materialized"
        time.sleep(0.01)
    watcher = StatusWatcher(gate.engine, interval=5.0)
    woke: list[float] = []
    waiting = threading.Thread(target=lambda: woke.append(_woken_at(watcher, update_id)))
    waiting.start()
    ended = _ended_at(gate, update_id)
    waiting.join(10)
    assert woke, "the waiter did not wake"
    assert woke[0] - ended < 0.3, f"woke {woke[0] - ended:.2f} s after the end (a beat every 5 s)"


def _woken_at(watcher: StatusWatcher, update_id: int) -> float:
    status = asyncio.run(watcher.wait(update_id, timeout=8.0))
    assert status in UPDATE_TERMINAL, status
    return time.monotonic()


def test_submit_through_the_service_sends_the_file_and_a_refused_one_is_named(stack, tmp_path):
    """`submit` through the service sends the file's text (no prompt parser before the
    commit); the service parses it, and a prompt it refuses is parsed here for the error that
    names the file."""
    from support.cli import run_cli

    service, gate = stack
    env = {"PROMPTGATE_URL": service.url, "PROMPTGATE_TOKEN": service.tokens["submit"]}
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(rules_spec("p1").to_config()))
    done = run_cli("submit", str(good), "--source-key", "text", "--json", env=env)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["prompt"] == "p1" and gate.status(shown["id"]).update.candidate_config == rules_spec("p1").to_config()
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: p1\nmodel: mock-1\nmessages: []\nlables: [a]\n")
    refused = run_cli("submit", str(bad), env=env)
    assert refused.returncode == 2 and str(bad) in refused.stderr and "lables" in refused.stderr, refused.stderr
