"""A compared prompt's first version (issue 46.1) on MariaDB with the local model server and
real worker processes: with no live version there is nothing to compare with, so a prompt
whose decision names a judge for its first version (``first: {judge, pass}``) is graded by
it, APPLIED only when its bars clear and REJECTED when they do not; once a version is live
the comparison is used (gate/kinds/first.py)."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator
from support.judging import (
    NO_REFUND_REPLIES,
    WEAK_REPLIES,
    live_judge,
    pair_judge_spec,
    reply_spec,
    write_pairs,
    write_tickets,
)
from support.workers_harness import WorkerFleet, worker_env

from gate.errors import NotFound
from gate.mockllm import MockLLMServer
from gate.report.markdown import render_markdown
from gate.report.text import render_text
from gate.schemas import status_schema
from gate.states import UpdateStatus
from workers.supervisor import run_until_terminal

FIRST = {"judge": "reply-judge", "pass": ["good"]}


@pytest.fixture
def llm(monkeypatch):
    with MockLLMServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield server


@pytest.fixture
def workers(tmp_path):
    fleets = []

    def start(gate, llm, processes=1, **settings):
        env = worker_env(gate.settings.database_url, llm.base_url, **{"chunk_size": 8, "concurrency": 4, **settings})
        fleet = WorkerFleet(env, tmp_path)
        fleet.start(processes)
        fleets.append(fleet)
        return fleet

    yield start
    for fleet in fleets:
        fleet.stop_all()


def in_process(gate):
    return lambda update_id: run_until_terminal(gate, [update_id], timeout=60)[0]


def judges(gate, tmp_path) -> None:
    """The graded judge and the comparing judge, each live on its human-labelled dataset."""
    live_judge(gate, tmp_path, in_process(gate))
    gate.register_dataset("pairs", str(write_pairs(tmp_path / "pairs.csv", 60)))
    gate.map_dataset("pair-judge", "pairs", "0.5")
    assert in_process(gate)(gate.submit(pair_judge_spec(), "apply")).status == UpdateStatus.APPLIED


def compared(rules=None, **extra):
    return reply_spec(*([rules] if rules else []), judge="pair-judge", compare="live", **extra)


def test_a_compared_prompts_first_version_is_graded_by_its_first_judge_and_applied_only_when_it_clears(
    mysql_gate, llm, workers, tmp_path
):
    gate = mysql_gate
    judges(gate, tmp_path)
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 30)))
    gate.map_dataset("reply", "tickets", "0.8", bars={"max_loss_rate": 0.05, "sentinels": 0, "early_stop": False})
    workers(gate, llm)
    weak = gate.wait(gate.submit(compared(WEAK_REPLIES, first=FIRST), "apply"), timeout=60)
    assert weak.status == UpdateStatus.REJECTED, weak.update.reason  # a third of the replies pass the graded judge
    assert weak.update.reason == "missed: tickets 33.3% < bar 80%"
    with pytest.raises(NotFound):
        gate.live("reply")
    good = gate.wait(gate.submit(compared(first=FIRST), "apply"), timeout=60)
    assert good.status == UpdateStatus.APPLIED, good.update.reason
    (run,) = good.runs
    graded = {"type": "judge", "judge": "reply-judge", "pass": ["good"], "first_version": True}
    assert graded.items() <= run.pinned["decision"].items()  # the rule it was judged by, marked a first version
    assert run.pinned["judge"]["name"] == "reply-judge" and run.pinned["judge"].get("compare") is None
    assert run.judge["calls"]["judge"]["calls"] > 0 and run.judge.get("pairwise") is None  # graded, not compared
    checks = {c["bar"]: c for c in run.checks}
    assert checks["min_accuracy"]["state"] == "pass" and checks["min_accuracy"]["value"] == "100.0%"
    assert checks["max_loss_rate"]["state"] == "n/a" and "first:" in checks["max_loss_rate"]["note"]
    live = gate.live("reply")  # what went live is the prompt file as written: compared from now on
    assert live.config["decision"]["compare"] == "live" and live.config["decision"]["first"] == FIRST
    text = render_text(good)
    assert "tickets: 100.0% vs bar 80% [pass]" in text and "judge reply-judge v1" in text
    assert "first version is graded by the judge its prompt names for it" in text
    assert "| tickets | 100.0% (30/30) | 80% | ✅ pass |" in render_markdown([good])
    Draft202012Validator(status_schema()).validate(good.to_dict())
    # a live version exists: the next version is compared with it, first: no longer used
    worse = gate.wait(gate.submit(compared(NO_REFUND_REPLIES, first=FIRST), "apply"), timeout=60)
    (run,) = worse.runs
    assert run.pinned["judge"]["name"] == "pair-judge" and run.judge["pairwise"]["live"] is True
    assert run.judge["pairwise"]["losses"] == 10
    assert worse.status == UpdateStatus.REJECTED, worse.update.reason
    assert gate.live("reply").version == 1
