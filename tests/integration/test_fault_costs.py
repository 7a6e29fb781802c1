"""Faults cost what they should (issue 38), one fault at a time: a claim lost to a dead worker
spends no attempt, and an item whose every claim is lost ends ERROR "lost" at the claim cap
without taking the items claimed with it along; a worker killed while its chunk waits for
its slowest call loses only the calls in flight, and the report says how many more calls may
have been made than it recorded."""

from __future__ import annotations

import csv
import signal
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import select
from support.helpers import rules_spec
from support.workers_harness import WorkerFleet, worker_env

from gate.mockllm import MockLLMServer
from gate.settings import Settings
from gate.states import UpdateStatus, Verdict
from gate.store.items import claim_items
from gate.store.schema import prompt_run_item
from workers.materialize import Materializer


def write_rows(path: Path, n: int, lines: dict[int, str] | None = None) -> Path:
    """n rows the local model server's rules answer right; row i's text gets ``lines[i]``
    (a line of the server's item script: ``delay_ms: ...``, ``status: ...``)."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "text"])
        for i in range(n):
            extra = f"\n{lines[i]}" if lines and i in lines else ""
            w.writerow([f"i{i}", "yes" if i % 2 else "no", f"{'alpha' if i % 2 else 'beta'} message {i}{extra}"])
    return path


def materialized(gate, tmp_path, n: int, lines=None) -> int:
    gate.register_dataset("d", str(write_rows(tmp_path / "d.csv", n, lines)))
    gate.map_dataset("p1", "d", "1")
    uid = gate.submit(rules_spec("p1"), "check")
    materializer = Materializer(gate.engine, gate.settings, threading.Event())
    while materializer.poll() == 0:
        pass
    return gate.status(uid).runs[0].run_id


def item_rows(gate, run_id: int):
    i = prompt_run_item
    with gate.engine.connect() as conn:
        return conn.execute(
            select(i.c.position, i.c.verdict, i.c.attempt, i.c.claims, i.c.error)
            .where(i.c.run_id == run_id)
            .order_by(i.c.position)
        ).all()


def wait_written(gate, run_id: int, n: int, within: float) -> None:
    """Until ``n`` items of the run have their answer written (a verdict, not PENDING) or
    ``within`` seconds have passed: the calls counted afterwards say whether they were (a
    fixed second's sleep was both longer than needed and, under load, maybe too short)."""
    deadline = time.monotonic() + within
    while sum(r.verdict != Verdict.PENDING for r in item_rows(gate, run_id)) < n and time.monotonic() < deadline:
        time.sleep(0.05)


def claim(gate, run_id: int, limit: int = 10, lease: float = 0.2):
    with gate.engine.begin() as conn:
        _, items = claim_items(conn, run_id, limit, lease, 3)
    return items


def test_a_lost_claim_spends_no_attempt_and_the_claim_cap_ends_an_item_lost_every_time(gate, tmp_path):
    """Five claims in a row lost (a worker killed holding the item each time, its lease run
    out): none is an attempt, the attempt cap of 3 untouched, the item claimed again each
    time; at the claim cap (5) it ends ERROR "lost", not "no result after every attempt"."""
    run_id = materialized(gate, tmp_path, 1)
    for n in range(1, 6):
        claimed = claim(gate, run_id)
        assert [i.attempt for i in claimed] == [1], item_rows(gate, run_id)  # its first attempt, each time
        assert [(r.attempt, r.claims) for r in item_rows(gate, run_id)] == [(0, n)]
        time.sleep(0.3)  # the worker died: its lease runs out
    assert claim(gate, run_id) == []
    ((_, verdict, attempt, claims, error),) = item_rows(gate, run_id)
    assert (verdict, attempt, claims) == (Verdict.ERROR, 0, Settings().claim_cap)
    assert error.startswith("lost: every claim of it in a row ended without a result"), error


def test_items_lost_twice_in_a_row_are_claimed_one_at_a_time(gate, tmp_path):
    """A chunk lost once comes back together; lost twice, each of its items comes alone (one
    of them may be what kills its workers), and a claimer that holds one takes none."""
    run_id = materialized(gate, tmp_path, 4)
    assert len(claim(gate, run_id)) == 4
    time.sleep(0.3)
    assert len(claim(gate, run_id)) == 4  # lost once: together again
    time.sleep(0.3)
    first = claim(gate, run_id, lease=30)
    assert [(i.position, i.claims) for i in first] == [(0, 3)]
    with gate.engine.begin() as conn:
        assert claim_items(conn, run_id, 10, 30, 3, suspects=False)[1] == []  # holding one: no other


def test_a_worker_killed_while_its_chunk_waits_for_its_slowest_call_loses_only_the_calls_in_flight(
    mysql_gate, tmp_path
):
    """At the defaults (chunk 32, 8 calls in flight, lease 30 s): one chunk of 32 whose item
    0 answers after 20 s (its first call), the others at once. The worker is killed once the
    31 have answered. They were written back as they answered (before, they waited for item 0
    and died with the process: the server saw each twice); only item 0's call is made again.
    The report counts 32 calls recorded and says at most 8 more may have been made."""
    gate = mysql_gate
    defaults = Settings()
    gate.register_dataset("d", str(write_rows(tmp_path / "d.csv", 32, {0: "delay_ms: 20000,0"})))
    gate.map_dataset("p1", "d", "1")
    with MockLLMServer(latency_ms=20) as llm:
        fleet = WorkerFleet(worker_env(gate.settings.database_url, llm.base_url), tmp_path)
        try:
            (first,) = fleet.start(1)
            uid = gate.submit(rules_spec("p1"), "apply", reuse=False)
            deadline = time.monotonic() + 60
            while not (llm.stats()["requests"] == 32 and llm.stats()["in_flight"] == 1):
                assert time.monotonic() < deadline, llm.stats()
                time.sleep(0.02)
            wait_written(gate, gate.status(uid).runs[0].run_id, 31, within=15)  # the 31 answered
            fleet.kill(first, signal.SIGKILL)
            fleet.start(1)
            report = gate.wait(uid, timeout=120)
            calls = llm.stats()["requests"]
        finally:
            fleet.stop_all()
    assert report.status == UpdateStatus.APPLIED, report.update.reason
    assert calls == 33, f"{calls} calls for 32 items and one kill"  # item 0 twice, no other
    assert calls <= 32 + defaults.concurrency
    assert report.spend["calls_made"] == 32  # item 0's first call died with the worker
    assert report.spend["calls_made"] <= calls <= report.spend["calls_made"] + report.spend["calls_unrecorded"]
    assert report.attempts["max_attempt"] == 1  # the lost claim was no attempt


@pytest.mark.slow
def test_an_item_that_kills_every_worker_ends_lost_and_the_rest_are_scored(mysql_gate, tmp_path):
    """A poison item: every worker that calls it is killed (SIGKILL, then restarted). At the
    claim cap it ends ERROR "lost" and the run ends; the items claimed with it — lost with
    it once — are claimed apart from it after that and all scored. The update FAILED (one
    item could not be scored: max_error_rate is 0), the reason naming the kind, not the item.
    (A lease of 2 s: five leases of 30 s would take minutes.)"""
    gate = mysql_gate
    gate.register_dataset("d", str(write_rows(tmp_path / "d.csv", 64, {5: "poison"})))
    gate.map_dataset("p1", "d", "1")
    poisoned = threading.Event()

    def on_request(request) -> None:
        if any("poison" in str(m.get("content")) for m in request["messages"]):
            poisoned.set()
            time.sleep(5)  # the worker is killed meanwhile

    with MockLLMServer(latency_ms=50, on_request=on_request) as llm:
        fleet = WorkerFleet(worker_env(gate.settings.database_url, llm.base_url, lease_seconds=2), tmp_path)
        try:
            fleet.start(1)
            uid = gate.submit(rules_spec("p1"), "apply", reuse=False)
            kills = 0
            while not gate.status(uid).terminal and kills < 10:
                if poisoned.wait(0.2):
                    poisoned.clear()
                    fleet.kill(fleet.procs[0], signal.SIGKILL)
                    kills += 1
                    fleet.start(1)
            report = gate.wait(uid, timeout=60)
        finally:
            fleet.stop_all()
    rows = item_rows(gate, report.runs[0].run_id)
    assert kills == 5  # the claim cap (Settings().claim_cap)
    assert [(r.position, r.error[:5]) for r in rows if r.verdict != Verdict.MATCH] == [(5, "lost:")]
    assert max(r.claims for r in rows if r.position != 5) <= 3  # lost with it twice at most, then apart
    assert report.status == UpdateStatus.FAILED
    assert "1 of 64 items of d could not be scored (lost: 1" in report.update.reason
    assert "i5" not in report.update.reason


def test_a_write_back_outlives_a_database_outage_shorter_than_its_lease(tmp_path):
    """The database stopped for 15 s while 8 calls are in flight, at the defaults (lease
    30 s): their answers come during the outage and their write-back retries until the
    database is back, well within the lease, and writes them: 16 calls for 16 items, nothing
    said lost. (A write-back gave up after 12 runs, ~8 s: it logged "the lease was lost",
    and the items were called again once their lease ran out.) Its own server: the session's
    is shared; like the session's, its data in memory when there is room and its log flushed
    once a second (the outage is a clean stop: nothing unflushed to lose), which makes its
    install and the migrations ~3 s quicker."""
    from support.mariadb_server import LocalMariaDB, create_database, memory_folder, running

    from gate.domain import Gate

    with running(LocalMariaDB(durable=False, base=memory_folder())) as server:
        url = create_database(server.url(), "outage")
        gate = Gate.connect(url, upgrade=True)
        gate.register_dataset("d", str(write_rows(tmp_path / "d.csv", 16)))
        gate.map_dataset("p1", "d", "1")
        with MockLLMServer(latency_ms=2000) as llm:
            fleet = WorkerFleet(worker_env(url, llm.base_url), tmp_path)
            try:
                fleet.start(1)
                uid = gate.submit(rules_spec("p1"), "apply", reuse=False)
                deadline = time.monotonic() + 60
                while llm.stats()["requests"] < 8:
                    assert time.monotonic() < deadline, llm.stats()
                    time.sleep(0.02)
                server.stop()
                time.sleep(15)
                server.start()
                gate.engine.dispose()
                report = gate.wait(uid, timeout=120)
                calls = llm.stats()["requests"]
            finally:
                fleet.stop_all()
        gate.close()
    logs = fleet.logs()
    assert report.status == UpdateStatus.APPLIED, report.update.reason
    assert calls == 16, f"{calls} calls for 16 items"
    assert "database error in transaction run" in logs  # the outage was met, and retried
    assert "dropped" not in logs and "not written" not in logs, logs
