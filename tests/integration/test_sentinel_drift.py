"""Sentinels with stated power (issue 46.6), on MariaDB with real worker processes and the
local model server: a judged run's sentinels are judged throughout the run in the order the
judge is called, not up front; a judge that agrees as pinned for the first three quarters of
a 40-item run and then flips every verdict is caught at the default budget (the run ERROR,
the update FAILED, the drift named), where the Fisher test over the whole run saw 9 of 10
agree and passed it; an honest judge's run passes, and its report states what its sentinels
could have caught and their false-alarm rate."""

from __future__ import annotations

import signal
import threading
import time

import pytest
from jsonschema import Draft202012Validator
from sqlalchemy import select
from support import judged_env
from support.judging import live_judge, reply_spec, write_tickets

from gate.mockllm import MockLLMServer
from gate.report.markdown import render_report_markdown as render_markdown
from gate.report.text import render_text
from gate.schemas import status_schema
from gate.states import UpdateStatus
from gate.store.schema import prompt_run_sentinel
from gate.verdict.judge_bars import DEFAULT_SENTINELS
from workers.supervisor import run_until_terminal

workers = judged_env.workers  # a shared fixture

LABEL_ANSWERS = ("A refund has been issued to your card.", "Thanks for writing; we will look into it.")


class JudgeCalls:
    """Every judging request the model server received, in order: a sentinel (the judge on
    one of its human-labelled rows, whose answers are the labels file's) or an item."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen: list[str] = []

    def __call__(self, request: dict) -> None:
        messages = request.get("messages") or []
        system = " ".join(str(m.get("content")) for m in messages if m.get("role") == "system")
        if "judge" not in system:
            return
        user = " ".join(str(m.get("content")) for m in messages if m.get("role") == "user")
        with self.lock:
            self.seen.append("sentinel" if any(f"<answer>{a}</answer>" in user for a in LABEL_ANSWERS) else "item")

    def clear(self) -> None:
        with self.lock:
            self.seen.clear()


@pytest.fixture
def calls():
    return JudgeCalls()


@pytest.fixture
def llm(monkeypatch, calls):
    with MockLLMServer(on_request=calls) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield server


def judged_run(gate, llm, calls, tmp_path, drift_after: int | None, disagree: int = 14):
    """A 40-ticket run of a good drafter under a judge that agrees with the humans on all but
    ``disagree`` of 200 items (93 %); ``drift_after``: judging calls of the run before every
    verdict flips."""
    run = lambda u: run_until_terminal(gate, [u], timeout=60)[0]  # noqa: E731
    live_judge(gate, tmp_path, run, disagree=disagree)
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 40)))
    gate.map_dataset("reply", "tickets", "0.7", bars={"early_stop": False})
    calls.clear()
    llm.drift_judges(drift_after)
    return gate.submit(reply_spec())


def test_sentinels_are_judged_throughout_the_run_in_judge_call_order(mysql_gate, llm, calls, workers, tmp_path):
    gate = mysql_gate
    update_id = judged_run(gate, llm, calls, tmp_path, None)
    workers(gate, llm)
    report = gate.wait(update_id, timeout=90)
    assert report.status == UpdateStatus.PASSED, report.update.reason
    order = list(calls.seen)
    sentinels = [n for n, who in enumerate(order) if who == "sentinel"]
    planned = report.runs[0].judge["sentinels"]["planned"]
    assert len(sentinels) == planned and order.count("item") == 40
    # each quarter of the run's judging calls holds about a quarter of its sentinels
    quarters = [sum(1 for n in sentinels if q * len(order) <= 4 * n < (q + 1) * len(order)) for q in range(4)]
    assert min(quarters) >= planned // 4 - 2, (quarters, order)
    assert sentinels[-1] >= len(order) - len(order) // 8, order  # the last few calls hold a sentinel


def calls_before(item: int, items: int = 40) -> int:
    """The judging calls made before the run's ``item``-th item is judged: the items before
    it and the default budget's sentinels riding on them (gate/domain/judging.py)."""
    count = DEFAULT_SENTINELS
    return item + sum(1 for k in range(count) if (2 * k + 1) * items // (2 * count) < item)


@pytest.mark.parametrize(("late", "disagree"), [(30, 14), (32, 14), (30, 20)])  # pinned 93 % or 90 %
def test_a_judge_that_drifts_late_is_caught_at_the_default_budget(
    mysql_gate, llm, calls, workers, tmp_path, late, disagree
):
    """The judge agrees as pinned on the first 30 of 40 items, then flips every verdict
    (issue 46.6: 9 of 10 sentinels agreed, p = 0.758, PASSED with verdicts flipped); on the
    first 32, the last fifth; and a judge pinned at 90 % (10 % agreement once flipped)."""
    gate = mysql_gate
    update_id = judged_run(gate, llm, calls, tmp_path, drift_after=calls_before(late), disagree=disagree)
    workers(gate, llm, concurrency=1)  # one call at a time: the drift falls where it is meant to
    report = gate.wait(update_id, timeout=90)
    (run,) = report.runs
    assert report.status == UpdateStatus.FAILED and run.status == "ERROR", report.update.reason
    assert report.update.reason.startswith("tickets: judge drifted: "), report.update.reason
    sentinels = run.judge["sentinels"]
    assert sentinels["drifted"] and sentinels["cusum"] >= sentinels["threshold"]
    # a flip (from 93 % to 7 %, or 90 % to 10 %) over the last quarter is within what the run says it catches
    assert sentinels["power"]["to"] >= disagree / 200 and sentinels["power"]["false_alarm"] <= 0.01
    assert "judge drifted" in render_text(report) and "judge drifted" in render_markdown(report)


def test_an_honest_judge_passes_and_its_sentinels_state_their_power(mysql_gate, llm, calls, workers, service, tmp_path):
    gate = mysql_gate
    update_id = judged_run(gate, llm, calls, tmp_path, None)
    workers(gate, llm)
    report = gate.wait(update_id, timeout=90)
    assert report.status == UpdateStatus.PASSED, report.update.reason
    sentinels = report.runs[0].judge["sentinels"]
    assert not sentinels["drifted"]
    power = sentinels["power"]
    assert power["probability"] == 0.9 and power["false_alarm"] <= 0.01
    assert power["from"] == pytest.approx(0.93) and power["to"] is not None and power["to"] < power["from"]
    text, markdown = render_text(report), render_markdown(report)
    for shown in (text, markdown):
        assert "would catch, with 90 % probability, a judge whose agreement fell from 93 % to" in shown
        assert "false alarms at most 1 %" in shown
    doc = report.to_dict()
    Draft202012Validator(status_schema()).validate(doc)
    assert doc["runs"][0]["judge"]["sentinels"]["power"] == power
    with service.client("read") as web:
        page = web.get(f"/updates/{update_id}").text
    assert "would catch, with 90 % probability, a judge whose agreement fell from 93 % to" in page
    assert "false alarms at most 1 %" in page


def test_sentinels_survive_a_killed_worker(mysql_gate, llm, calls, workers, tmp_path):
    """A worker killed halfway through a judged run: its claimed items and the sentinels
    riding on them are judged by the next worker, each sentinel written once, and an honest
    judge's run still passes (a lost sentinel neither alarms nor goes missing)."""
    gate = mysql_gate
    llm.faults.latency_ms = 20  # calls in flight when the kill comes
    update_id = judged_run(gate, llm, calls, tmp_path, None)
    fleet = workers(gate, llm, lease_seconds=2)
    deadline = time.monotonic() + 60
    while len(calls.seen) < 40:
        assert time.monotonic() < deadline, calls.seen
        time.sleep(0.02)
    fleet.kill(fleet.procs[0], signal.SIGKILL)
    fleet.start(1)
    report = gate.wait(update_id, timeout=90)
    assert report.status == UpdateStatus.PASSED, report.update.reason
    (run,) = report.runs
    sentinels = run.judge["sentinels"]
    assert sentinels["judged"] == sentinels["planned"] == DEFAULT_SENTINELS and not sentinels["drifted"]
    with gate.engine.connect() as conn:
        rows = conn.execute(
            select(prompt_run_sentinel.c.verdict, prompt_run_sentinel.c.calls).where(
                prompt_run_sentinel.c.run_id == run.run_id
            )
        ).all()
    assert len(rows) == DEFAULT_SENTINELS and all(v != "PENDING" and c >= 1 for v, c in rows)
    assert calls.seen.count("sentinel") >= DEFAULT_SENTINELS  # a killed call may be made again
