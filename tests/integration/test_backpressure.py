"""Backpressure is not failure (issue 38): a provider that answers 429 with a Retry-After is
asking to wait. At the defaults (attempt cap 3) such answers spend no item's attempts and
slow the workers down through the shared limit they teach; an item the provider never
stops asking to wait ends ERROR once its time budget is spent, saying so."""

from __future__ import annotations

import csv

from sqlalchemy import select
from support.helpers import rules_spec, write_rule_rows
from support.workers_harness import WorkerFleet, worker_env

from gate.mockllm import MockLLMServer
from gate.states import UpdateStatus, Verdict
from gate.store.schema import prompt_run_item, rate_limit_bucket

ITEMS = 300


def items_of(gate, run_id: int):
    i = prompt_run_item
    with gate.engine.connect() as conn:
        return conn.execute(select(i.c.item_id, i.c.verdict, i.c.attempt, i.c.error).where(i.c.run_id == run_id)).all()


def test_a_provider_answering_30_percent_429s_gets_its_change_applied_at_the_defaults(mysql_gate, tmp_path):
    """30 % of the calls answered 429 with a Retry-After of 100 ms, two worker processes at
    the defaults: the update is APPLIED with every item answered right on its first
    attempt (before, an item 429'd three times in a row ended ERROR: ~2.7 % of them, and the
    update FAILED). The workers learned a shared limit from the 429s, paused it for each,
    and waited on it."""
    gate = mysql_gate
    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", ITEMS)))
    gate.map_dataset("p1", "d", "1")
    with MockLLMServer(latency_ms=10, rate_limit_rate=0.3, retry_after_ms=100, seed=38) as llm:
        fleet = WorkerFleet(worker_env(gate.settings.database_url, llm.base_url), tmp_path)
        try:
            fleet.start(2)
            report = gate.wait(gate.submit(rules_spec("p1"), "apply", reuse=False), timeout=240)
            outcomes = llm.stats()["outcomes"]
        finally:
            fleet.stop_all()
    print(f"429s={outcomes['rate_limited']} attempts={report.attempts}")
    assert report.status == UpdateStatus.APPLIED, report.update.reason
    rows = items_of(gate, report.runs[0].run_id)
    assert {r.verdict for r in rows} == {Verdict.MATCH} and len(rows) == ITEMS
    assert {r.attempt for r in rows} == {1}  # a 429 spent no attempt
    assert outcomes["rate_limited"] > ITEMS * 0.2 and report.attempts["rate_limited_calls"] > 0
    assert report.attempts["throttled_calls"] > 0  # calls waited for the shared limit's pauses
    with gate.engine.connect() as conn:
        learned = conn.execute(
            select(rate_limit_bucket.c.name, rate_limit_bucket.c.rate_limited).where(
                rate_limit_bucket.c.name.like("%|429")
            )
        ).all()
    assert [name for name, _ in learned] == [f"127.0.0.1:{llm.port}|mock-1|429"]  # gate.ratelimit.LEARNED_SUFFIX
    assert learned[0].rate_limited > 0  # every 429 paused it, for every worker


def test_an_item_the_provider_never_stops_asking_to_wait_ends_at_its_budget(mysql_gate, tmp_path):
    """One item answered 429 (Retry-After 200 ms) every time, a backpressure budget of 2 s:
    it is called well past the attempt cap of 3 — waiting is not failing — and then ends
    ERROR saying its budget was spent; the others are answered. The update FAILED: one
    item could not be scored (max_error_rate 0)."""
    gate = mysql_gate
    path = tmp_path / "d.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "text"])
        for i in range(20):
            w.writerow([f"i{i}", "yes", "alpha" + ("\nstatus: 429" if i == 7 else "")])
    gate.register_dataset("d", str(path))
    gate.map_dataset("p1", "d", "1")
    with MockLLMServer(latency_ms=5, retry_after_ms=200) as llm:
        env = worker_env(gate.settings.database_url, llm.base_url, backpressure_seconds=2)
        fleet = WorkerFleet(env, tmp_path)
        try:
            fleet.start(1)
            report = gate.wait(gate.submit(rules_spec("p1"), "apply", reuse=False), timeout=120)
            outcomes = llm.stats()["outcomes"]
        finally:
            fleet.stop_all()
    rows = {r.item_id: r for r in items_of(gate, report.runs[0].run_id)}
    stuck = rows.pop("i7")
    assert stuck.verdict == Verdict.ERROR and stuck.attempt <= 1
    assert "past the item's backpressure budget of 2 s (PROMPTGATE_BACKPRESSURE_SECONDS)" in stuck.error
    assert stuck.error.startswith("rate_limit: ")
    assert outcomes["rate_limited"] > 3  # called past the attempt cap: the 429s spent none
    assert {r.verdict for r in rows.values()} == {Verdict.MATCH}
    assert report.status == UpdateStatus.FAILED
    assert "1 of 20 items of d could not be scored (rate_limit: 1" in report.update.reason
