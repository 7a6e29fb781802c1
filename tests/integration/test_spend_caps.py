"""Spend caps (the gate config's `limits:`, gate/calls/spend_caps.py) on MariaDB with real worker
processes and the local model server: a cap on calls is never exceeded across two worker
processes and ends the update FAILED with the figures; a cost cap reserves each call's
most before making it; a cost cap refuses a call whose cost cannot be bounded; the limits
come from the default branch's gate config only."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
import yaml
from support.helpers import RULES, rules_spec, write_rule_rows
from support.migrated import migrated
from support.workers_harness import WorkerFleet, worker_env

from gate import gateconfig
from gate.db import read
from gate.domain import Gate
from gate.errors import UsageError
from gate.mockllm import MockLLMServer
from gate.prompt.spec import parse_spec
from gate.records import Price
from gate.states import UpdateStatus
from gate.store.spend import spend_of_update
from workers import ROLES
from workers.execute.spend import SpendGuard
from workers.supervisor import WorkerProcess


@pytest.fixture
def llm():
    with MockLLMServer() as server:
        yield server


@pytest.fixture
def workers(tmp_path):
    fleets = []

    def start(gate, llm, processes):
        f = WorkerFleet(worker_env(gate.settings.database_url, llm.base_url, chunk_size=8, concurrency=4), tmp_path)
        f.start(processes)
        fleets.append(f)
        return f

    yield start
    for f in fleets:
        f.stop_all()


def test_a_call_cap_is_never_exceeded_across_two_worker_processes(mysql_gate, llm, workers, tmp_path):
    gate = mysql_gate
    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 1000)))  # 100 %: no early stop
    gate.map_dataset("p1", "d", "0.9")
    gate.set_limit("max_calls_per_update", "300")
    uid = gate.submit(rules_spec("p1"), reuse=False)
    assert gate.status(uid).spend["calls_bound"] == 1000 and gate.status(uid).spend["max_calls_per_update"] == 300
    workers(gate, llm, 2)
    report = gate.wait(uid, timeout=60)
    calls = llm.stats()["requests"]
    assert report.status == UpdateStatus.FAILED and calls <= 300, (calls, report.update.reason)
    (run,) = report.runs
    assert report.update.reason == (
        f"spend cap reached: max_calls_per_update 300: 300 calls made; {run.stopped:,} of 1,000 items of d not called"
    )
    assert run.stop["kind"] == "spend_cap" and run.passed is None and run.scored + run.errors + run.stopped == 1000
    assert report.spend["calls_made"] == calls and calls >= run.scored  # every call counted
    with gate.engine.connect() as conn:
        assert spend_of_update(conn, uid)[0] == 300  # reserved: exactly the cap


def test_a_cost_cap_reserves_each_calls_most_and_settles_to_its_cost(mysql_gate, llm, workers, tmp_path):
    gate = mysql_gate
    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 400)))
    gate.map_dataset("p1", "d", "0.9")
    gate.set_price(Price("mock-1", Decimal("10"), Decimal("20")))  # $ per 1M tokens
    gate.set_limit("max_cost_per_update_usd", "0.05")
    spec = parse_spec(
        {
            "name": "p1",
            "model": "mock-1",
            "params": {"max_tokens": 5},
            "messages": [{"role": "system", "content": RULES}, {"role": "user", "content": "{{ item.text }}"}],
        }
    )
    uid = gate.submit(spec, reuse=False)
    workers(gate, llm, 2)
    report = gate.wait(uid, timeout=60)
    assert report.status == UpdateStatus.FAILED, report.update.reason
    assert report.update.reason.startswith("spend cap reached: max_cost_per_update_usd $0.05: $")
    cost = Decimal(report.spend["cost_reserved_usd"])
    (run,) = report.runs
    spent = Decimal(run.metrics["cost_usd"])  # what the answers written back cost, at the price
    assert spent <= cost <= Decimal("0.05") and 20 < run.scored < 400 and llm.stats()["requests"] < 400
    with gate.engine.connect() as conn:
        calls, reserved, in_flight = spend_of_update(conn, uid)
    assert in_flight == 0 and calls == llm.stats()["requests"]  # every call settled, none left in flight


def test_a_cost_cap_needs_each_calls_cost_bounded(mysql_gate, tmp_path):
    gate = mysql_gate
    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 10)))
    gate.map_dataset("p1", "d", "0.9")
    gate.set_limit("max_cost_per_update_usd", "1")
    with pytest.raises(UsageError, match="does not name"):  # no price
        gate.submit(rules_spec("p1"))
    gate.set_price(Price("mock-1", Decimal("1"), Decimal("1")))
    with pytest.raises(UsageError, match="sets no params.max_tokens"):  # no bound on the output
        gate.submit(rules_spec("p1"))
    assert gate.list_updates() == []  # nothing half-written


def test_limits_come_from_the_default_branch_only(gate, tmp_path):
    """A sync (the default branch) sets the caps and a submission pins them; a pull
    request's gate config that raises them is only diffed: the gate keeps its own."""
    write_rule_rows(tmp_path / "d.csv", 4)
    config = {
        "datasets": {"d": {"source": "d.csv"}},
        "prompts": {"p1": [{"dataset": "d", "min_accuracy": 0.5}]},
        "limits": {"max_calls_per_update": 100},
    }
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(config))
    assert gateconfig.sync(gate, path).lines() == [
        "limit max_calls_per_update: new, 100 calls",
        "dataset d: new, source d.csv",
        "bar p1 × d: new, min accuracy 0.5",
    ]
    assert gate.limits() == {"max_calls_per_update": "100"} and gateconfig.sync(gate, path).changes == ()
    config["limits"] = {"max_calls_per_update": 100000, "max_cost_per_update_usd": 2.5}
    path.write_text(yaml.safe_dump(config))
    planned = gateconfig.diff(gate, path)
    assert sorted(planned.lines()) == [
        "limit max_calls_per_update: 100 calls → 100,000 calls",
        "limit max_cost_per_update_usd: new, $2.5",
    ]
    assert gate.limits() == {"max_calls_per_update": "100"}  # the diff changed nothing
    uid = gate.submit(rules_spec("p1"))
    assert gate.status(uid).spend["max_calls_per_update"] == 100
    del config["limits"]
    path.write_text(yaml.safe_dump(config))
    assert gateconfig.sync(gate, path).lines() == ["limit max_calls_per_update: removed (was 100 calls)"]
    assert gate.limits() == {} and gate.status(uid).spend["max_calls_per_update"] == 100  # pinned at submit


def _capped_spec(name: str):
    return parse_spec(
        {
            "name": name,
            "model": "mock-1",
            "params": {"max_tokens": 5},
            "messages": [{"role": "system", "content": RULES}, {"role": "user", "content": "{{ item.text }}"}],
        }
    )


def test_a_cancelled_capped_update_never_holds_the_workers_call_threads(mysql_gate, tmp_path):
    """Review: a call of an update under a cost cap whose reservation is refused because
    the update is no longer RUNNING (cancelled: a new push supersedes a check) or was
    stopped by another process found its budget unspent and waited for "calls in flight"
    forever, holding its call thread (and its rate-limit slot): after one cancellation
    the worker called nothing else."""
    gate = mysql_gate
    gate.register_dataset("big", str(write_rule_rows(tmp_path / "big.csv", 300)))
    gate.register_dataset("small", str(write_rule_rows(tmp_path / "small.csv", 12)))
    gate.map_dataset("p1", "big", "0.9")
    gate.map_dataset("p2", "small", "0.9")
    gate.set_price(Price("mock-1", Decimal("1"), Decimal("1")))
    gate.set_limit("max_cost_per_update_usd", "100")  # never reached here
    with MockLLMServer(latency_ms=150) as llm:
        fleet = WorkerFleet(worker_env(gate.settings.database_url, llm.base_url, chunk_size=4, concurrency=2), tmp_path)
        fleet.start(1)
        try:
            first = gate.submit(_capped_spec("p1"), reuse=False)
            deadline = time.monotonic() + 60
            while llm.stats()["requests"] < 4 and time.monotonic() < deadline:
                time.sleep(0.05)
            gate.cancel(first)
            second = gate.submit(_capped_spec("p2"), reuse=False)
            report = gate.wait(second, timeout=45)
            assert report.status == UpdateStatus.PASSED, (report.status, llm.stats()["requests"])
        finally:
            fleet.stop_all()


def test_a_call_that_cost_more_than_its_bound_is_recorded_at_its_cost(mysql_gate, llm, workers, tmp_path):
    """Review: settling kept min(reserved, cost), so a call whose provider answered past the
    bound (here the local server, which ignores max_tokens, answering a 30-word label to a
    max_tokens of 1) was recorded at its reservation: the update's spend said it stayed
    under the cap while the answers cost more. The spend recorded is what the calls cost."""
    gate = mysql_gate
    long_label = " ".join(["yes"] * 30)
    rules = f"Classify the message.\n- {long_label}: alpha\n- no: beta\ndefault: no"
    path = tmp_path / "d.csv"
    path.write_text("item_id,expected_decision,text\n" + "".join(f"i{i},no,beta message {i}\n" for i in range(40)))
    gate.register_dataset("d", str(path))
    gate.map_dataset("p1", "d", "0.9")
    gate.set_price(Price("mock-1", Decimal("0"), Decimal("1000")))  # output only: $0.001 a token
    gate.set_limit("max_cost_per_update_usd", "1000")
    spec = parse_spec(
        {
            "name": "p1",
            "model": "mock-1",
            "params": {"max_tokens": 1},
            "labels": [long_label, "no"],
            "messages": [{"role": "system", "content": rules}, {"role": "user", "content": "{{ item.text }} alpha"}],
        }
    )
    uid = gate.submit(spec, reuse=False)
    workers(gate, llm, 1)
    report = gate.wait(uid, timeout=60)
    (run,) = report.runs
    spent = Decimal(run.metrics["cost_usd"])  # the answers' tokens at the price
    assert spent > Decimal("0.04")  # more than 40 answers of 1 token each: past the bound
    assert Decimal(report.spend["cost_reserved_usd"]) >= spent, (report.spend, spent)


class StoppedRightAfterTheLastGrant(SpendGuard):
    """The interleaving the review met, made certain: the reservation that takes the cap's
    last call is granted, and before its call begins the update is stopped, as another call
    thread whose reservation was refused at that moment stops it (``_reached``)."""

    def reserve(self, run, item, messages):
        granted = super().reserve(run, item, messages)
        if granted is not None:
            calls, _, _ = read(self.engine, lambda conn: spend_of_update(conn, run.update_id))
            if calls == run.context.caps.max_calls_per_update:
                self._reached(run, item, None, "max_calls_per_update")
        return granted


def test_the_spend_caps_reason_counts_the_calls_made_not_the_reservations(db_url, llm, monkeypatch, tmp_path):
    """Review: the reason read "15 calls made" where the model server had received 14: a
    reservation granted to a call its update's stop then kept from being made stayed
    counted. It is given back; the reason, the spend and the server agree."""
    monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    gate = Gate.connect(migrated(db_url), upgrade=True)
    try:
        gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 40)))  # 100 %: no early stop
        gate.map_dataset("p1", "d", "0.9")
        gate.set_limit("max_calls_per_update", "15")
        uid = gate.submit(rules_spec("p1"), reuse=False)
        worker = WorkerProcess(gate.engine, gate.settings, ROLES, concurrency=1)
        executor = next(p for p in worker.pollers if p.role == "execute")
        executor.caller.spend = StoppedRightAfterTheLastGrant(gate.engine, executor.stopper, worker.stop)
        worker.start()
        try:
            report = gate.wait(uid, timeout=60)
        finally:
            worker.shutdown()
        made = llm.stats()["requests"]
        assert made == 14 and report.status == UpdateStatus.FAILED, (made, report.status)
        (run,) = report.runs
        assert report.update.reason == (
            f"spend cap reached: max_calls_per_update 15: 14 calls made; {run.stopped:,} of 40 items of d not called"
        )
        assert report.spend["calls_made"] == 14
    finally:
        gate.close()
