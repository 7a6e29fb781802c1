"""The four workers against real MariaDB, a real local model server over HTTP and real
worker processes: exactly-once end states, kill -9 chaos, stalled workers, a database
restart, the stale-apply race and provider faults."""

from __future__ import annotations

import random
import signal
import threading
import time

import pytest
from sqlalchemy import select, text
from support.helpers import rules_spec, write_rule_rows
from support.workers_harness import WorkerFleet, worker_env

from gate.domain import Gate
from gate.errors import NotFound
from gate.mockllm import MockLLMServer
from gate.prompt.spec import parse_spec
from gate.records import ItemResult
from gate.settings import Settings
from gate.states import UpdateStatus, Verdict
from gate.store.items import claim_items, write_item_results
from gate.store.schema import prompt_run_item
from workers.supervisor import WorkerProcess, run_until_terminal


@pytest.fixture
def mock_llm():
    with MockLLMServer(latency_ms=2) as server:
        yield server


@pytest.fixture
def fleet(tmp_path):
    fleets = []

    def make(env, args=("--role", "all")):
        f = WorkerFleet(env, tmp_path, args)
        fleets.append(f)
        return f

    yield make
    for f in fleets:
        f.stop_all()


def map_rule_dataset(gate, tmp_path, prompt, dataset, n, bar, wrong_every=0):
    if dataset not in {d.name for d, _ in gate.list_datasets()}:
        gate.register_dataset(dataset, str(write_rule_rows(tmp_path / f"{dataset}.csv", n, wrong_every)))
    gate.map_dataset(prompt, dataset, bar)


def wait_all(gate, ids, timeout):
    deadline = time.monotonic() + timeout
    return [gate.wait(i, timeout=max(0.0, deadline - time.monotonic())) for i in ids]


def item_rows(gate, run_ids):
    i = prompt_run_item
    with gate.engine.connect() as conn:
        return conn.execute(
            select(i.c.run_id, i.c.item_id, i.c.verdict, i.c.attempt).where(i.c.run_id.in_(run_ids))
        ).all()


def versions(gate, name):
    return gate.history(name)[::-1]  # oldest first


def test_four_processes_three_updates_exactly_once(mysql_gate, mock_llm, fleet, tmp_path):
    gate = mysql_gate
    for p, bar_a in (("p1", "0.9"), ("p2", "0.95"), ("p3", "0.9")):
        map_rule_dataset(gate, tmp_path, p, "d-a", 500, bar_a, wrong_every=10)  # exactly 90 %
        map_rule_dataset(gate, tmp_path, p, "d-b", 500, "1")  # 100 %
    # the three prompts send identical requests: no reuse, so each item is called (once);
    # p2 misses its bar: --full keeps it from stopping early (tests/integration/test_early_stop.py)
    ids = [
        gate.submit(rules_spec("p1"), "apply", reuse=False),
        gate.submit(rules_spec("p2"), "apply", reuse=False, full=True),
        gate.submit(rules_spec("p3"), "check", reuse=False),
    ]
    workers = fleet(worker_env(gate.settings.database_url, mock_llm.base_url, chunk_size=16))
    workers.start(4)
    reports = wait_all(gate, ids, 120)
    assert [r.status for r in reports] == [UpdateStatus.APPLIED, UpdateStatus.REJECTED, UpdateStatus.PASSED], [
        (r.update.reason, [(run.dataset, run.metrics) for run in r.runs]) for r in reports
    ]
    run_ids = [r.run_id for rep in reports for r in rep.runs]
    rows = item_rows(gate, run_ids)
    assert len(rows) == 3000 and len({(r.run_id, r.item_id) for r in rows}) == 3000
    assert all(r.verdict in (Verdict.MATCH, Verdict.MISMATCH) for r in rows)
    for rep in reports:
        a, b = rep.runs
        assert (a.matches, a.scored, b.matches, b.scored) == (450, 500, 500, 500)
    assert gate.live("p1").version == 1 and len(versions(gate, "p1")) == 1
    with pytest.raises(NotFound):
        gate.live("p2")
    assert mock_llm.stats()["requests"] == 3000  # no faults, no crashes: one call per item


def test_kill_9_chaos(mysql_gate, fleet, tmp_path):
    gate = mysql_gate
    map_rule_dataset(gate, tmp_path, "chaos", "big", 2000, "1")
    concurrency = 8
    with MockLLMServer(latency_ms=15, jitter_ms=10) as llm:
        env = worker_env(
            gate.settings.database_url,
            llm.base_url,
            lease_seconds=2,
            chunk_size=8,
            page_size=250,
            concurrency=concurrency,
            heartbeat_seconds=1,
        )
        workers = fleet(env)
        workers.start(4)
        uid = gate.submit(rules_spec("chaos"), "apply")
        kills, rng = 0, random.Random(7)
        # A worker takes ~1.5 s to start (imports), so kill for a bounded window, then let
        # the survivors finish: the gate must end right whatever the kills interrupted.
        deadline = time.monotonic() + 60
        while llm.stats()["requests"] < 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        chaos_until = time.monotonic() + 12
        while not gate.status(uid).terminal and (kills < 10 or time.monotonic() < chaos_until):
            time.sleep(0.5)
            working = [p for p in workers.procs if time.monotonic() - p.started_at > 1.5]
            workers.kill(rng.choice(working or workers.procs), signal.SIGKILL)
            kills += 1
            workers.start(1)
        report = gate.wait(uid, timeout=90)
        calls = llm.stats()["requests"]
    assert report.status == UpdateStatus.APPLIED, report.update.reason
    assert kills >= 10
    run = report.runs[0]
    assert (run.matches, run.scored, run.total) == (2000, 2000, 2000)
    rows = item_rows(gate, [run.run_id])
    assert len({r.item_id for r in rows}) == len(rows) == 2000
    assert gate.live("chaos").version == 1
    assert [v["update_id"] for v in versions(gate, "chaos")] == [uid]
    duplicates = calls - 2000
    # README's bound: a killed process loses at most concurrency + its write-back window calls
    # (issue 51: answers may wait in the window for their write-back; default window = concurrency)
    bound = concurrency + Settings(concurrency=concurrency).window
    print(f"kills={kills} model calls={calls} duplicates={duplicates} bound per kill={bound}")
    assert 0 <= duplicates <= kills * bound


def test_stalled_lease_cannot_write_late_results(gate, tmp_path):
    """Store level, both backends: a claim whose lease expired and whose items were
    re-claimed writes nothing; the re-claimer's results stand."""
    map_rule_dataset(gate, tmp_path, "p1", "d", 4, "0.5")
    uid = gate.submit(rules_spec("p1"), "check")
    from workers.materialize import Materializer

    # materialized under the normal lease: the stalled lease under test is the items' one
    # below (a 0.3 s lease here too once expired before a loaded CI machine wrote the page)
    Materializer(gate.engine, gate.settings, threading.Event()).poll()
    run_id = gate.status(uid).runs[0].run_id
    with gate.engine.begin() as conn:
        token_a, items_a = claim_items(conn, run_id, 10, 0.3, 3)
    assert len(items_a) == 4
    time.sleep(0.5)
    with gate.engine.begin() as conn:
        token_b, items_b = claim_items(conn, run_id, 10, 30, 3)
    assert {i.position for i in items_b} == {i.position for i in items_a}
    with gate.engine.begin() as conn:
        assert (
            write_item_results(
                conn, run_id, token_b, [ItemResult(i.position, Verdict.MATCH, actual_decision="b") for i in items_b]
            )
            == 4
        )
    with gate.engine.begin() as conn:
        assert (
            write_item_results(
                conn, run_id, token_a, [ItemResult(i.position, Verdict.MISMATCH, actual_decision="a") for i in items_a]
            )
            == 0
        )
    rows = item_rows(gate, [run_id])
    assert {r.verdict for r in rows} == {Verdict.MATCH}


def freeze_outside_a_transaction(gate, proc) -> None:
    """SIGSTOP ``proc`` (the only worker running) at a moment it holds no row lock. Frozen
    inside one of its polls' short transactions it would keep rows locked until MariaDB
    ends the idle transaction (db.IDLE_TRANSACTION_SECONDS, longer than these tests wait;
    test_claim_plans covers that case): a materialize claim's locking scan, for one, holds
    the run row just past its index range, which the other workers' finalize then skips.
    The worker polls again at once after dispatching its calls, when the test freezes it,
    so that was 1 run in 5. Caught inside one, it runs on for a moment and is frozen again."""
    for _ in range(10):
        proc.send_signal(signal.SIGSTOP)
        time.sleep(0.05)
        with gate.engine.connect() as conn:
            if not conn.execute(
                text("SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_rows_locked > 0")
            ).scalar():
                return
        proc.send_signal(signal.SIGCONT)
        time.sleep(random.uniform(0.03, 0.08))  # long enough for its threads to get the GIL and commit
    raise AssertionError("the worker was inside a transaction at every try")


def test_stopped_worker_process_loses_its_chunk(mysql_gate, fleet, tmp_path):
    """A worker frozen mid-call (SIGSTOP) past its lease: another re-claims and scores;
    when the first wakes up its write-back is dropped and counted.

    The frozen one runs no finalize or reconcile role: those hold a run's or an update's
    row lock for a moment, and a process frozen inside that moment keeps the row locked
    (the others skip it) until MariaDB ends its idle transaction (after
    db.IDLE_TRANSACTION_SECONDS; tests/test_claim_plans.py), longer than this test waits."""
    gate = mysql_gate
    map_rule_dataset(gate, tmp_path, "p1", "d", 4, "1")
    with MockLLMServer(latency_ms=1500) as llm:  # long enough to freeze it again if it must be
        env = worker_env(gate.settings.database_url, llm.base_url, lease_seconds=1, chunk_size=4)
        first = fleet(env, ("--role", "materialize,execute")).start(1)[0]
        uid = gate.submit(rules_spec("p1"), "apply")
        deadline = time.monotonic() + 30
        while llm.stats()["requests"] < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        freeze_outside_a_transaction(gate, first)
        second_fleet = fleet(env)
        second_fleet.start(1)
        report = gate.wait(uid, timeout=90)
        assert report.status == UpdateStatus.APPLIED, report.update.reason
        first.send_signal(signal.SIGCONT)
        time.sleep(1.5)
        first.terminate()  # draining: its late write-back happens before it exits
        first.wait(60)
    log = open(first.log_path).read()
    assert "dropped: the lease was lost" in log, log
    assert gate.live("p1").version == 1


def test_mariadb_restart_mid_run(fleet, tmp_path):
    """Its own server (the session's is shared by the other tests), restarted mid-run."""
    from support.mariadb_server import create_database, running

    with running() as server:
        url = create_database(server.url(), "restart")
        gate = Gate.connect(url, upgrade=True)
        map_rule_dataset(gate, tmp_path, "p1", "d", 1500, "1")
        with MockLLMServer(latency_ms=5) as llm:
            workers = fleet(worker_env(url, llm.base_url, lease_seconds=3))
            workers.start(2)
            uid = gate.submit(rules_spec("p1"), "apply")
            deadline = time.monotonic() + 60
            while llm.stats()["requests"] < 200 and time.monotonic() < deadline:
                time.sleep(0.05)
            server.restart()
            gate.engine.dispose()
            report = gate.wait(uid, timeout=90)
        assert report.status == UpdateStatus.APPLIED, report.update.reason
        assert report.runs[0].scored == 1500
        assert "database error" in workers.logs()
        gate.close()


def test_stale_apply_race(mysql_gate, tmp_path):
    """A newer submission cancels an update whose runs are about to finish, at random
    moments: a cancelled or stale update is never applied."""
    gate = mysql_gate
    rng = random.Random(3)
    with MockLLMServer(latency_ms=1) as llm:
        fast = gate.settings.with_(poll_interval=0.01, poll_max_interval=0.05)
        import os

        os.environ["OPENAI_BASE_URL"] = llm.base_url
        worker = WorkerProcess(gate.engine, fast, ["materialize", "execute", "finalize", "reconcile"], 8).start()
        try:
            for i in range(12):
                name = f"race{i}"
                map_rule_dataset(gate, tmp_path, name, f"d{i}", 30, "0.5")
                a = gate.submit(rules_spec(name, "A"), "apply")
                time.sleep(rng.uniform(0, 0.4))
                b = gate.submit(rules_spec(name, "B"), "apply")
                ra, rb = wait_all(gate, [a, b], 60)
                history = versions(gate, name)
                applied = [v["update_id"] for v in history]
                assert ra.status in (UpdateStatus.APPLIED, UpdateStatus.CANCELLED)
                if ra.status == UpdateStatus.CANCELLED:
                    assert a not in applied
                assert rb.status == UpdateStatus.APPLIED, rb.update.reason
                assert applied[-1] == b and gate.live(name).applied_update_id == b
                assert gate.live(name).config["description"] == "B"
                assert len(applied) == (2 if ra.status == UpdateStatus.APPLIED else 1)
        finally:
            worker.shutdown()
            os.environ.pop("OPENAI_BASE_URL", None)


def test_provider_faults_end_every_item_within_the_cap(mysql_gate, tmp_path, monkeypatch):
    """Faults at random (500s, hangs past the timeout, garbage) end every item within the
    attempt cap; and a prompt whose every call fails (503, retryable) exhausts them: each
    item ERROR at the cap, its run ERROR, its update FAILED (so the check of what an
    exhausted item does never passes for want of one)."""
    gate = mysql_gate
    map_rule_dataset(gate, tmp_path, "p1", "d", 300, "0.5")
    gate.map_dataset("p2", "d", "0.5")
    always_503 = parse_spec({**rules_spec("p2").to_config(), "model": "mock-error-503"})
    with MockLLMServer(error_rate=0.1, timeout_rate=0.05, garbage_rate=0.05, hang_seconds=3, seed=11) as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        settings = gate.settings.with_(
            request_timeout=0.5, backoff_base=0.05, backoff_max=0.2, attempt_cap=3, poll_interval=0.02
        )
        fast_gate = Gate(gate.engine, settings)
        ids = [fast_gate.submit(rules_spec("p1"), "apply"), fast_gate.submit(always_503, "apply")]
        report, exhausted = run_until_terminal(fast_gate, ids, timeout=90, concurrency=16)
        outcomes = llm.stats()["outcomes"]
    assert report.terminal
    rows = item_rows(gate, [report.runs[0].run_id])
    assert len(rows) == 300
    assert all(r.verdict in (Verdict.MATCH, Verdict.MISMATCH, Verdict.ERROR) for r in rows)
    assert max(r.attempt for r in rows) <= 3
    assert all(r.attempt == 3 for r in rows if r.verdict == Verdict.ERROR)
    if any(r.verdict == Verdict.ERROR for r in rows):
        assert (report.runs[0].status, report.status) == ("ERROR", UpdateStatus.FAILED)
    assert outcomes.get("error", 0) and outcomes.get("timeout", 0) and outcomes.get("garbage", 0)
    assert report.attempts["retried_items"] > 0

    rows = item_rows(gate, [exhausted.runs[0].run_id])
    assert len(rows) == 300 and {(r.verdict, r.attempt) for r in rows} == {(Verdict.ERROR, 3)}
    assert (exhausted.runs[0].status, exhausted.status) == ("ERROR", UpdateStatus.FAILED)
    assert "300 of 300 items of d could not be scored" in exhausted.update.reason
    assert outcomes.get("forced_error", 0) == 900  # three calls each, no more
