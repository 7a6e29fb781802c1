"""An UNDECIDED canary (issue 47 point 3), on MariaDB: not enough evidence, so it is rolled
back without a hold, unless its rollout says ``hold_undecided: true`` (then held as a
ROLLED_BACK canary always is, the hold naming the rollout). And the rollout stays CANARY,
the live row unchanged, until the reconcile step carries its decision out: the rollout
worker only asks, once."""

from __future__ import annotations

import time

import pytest
from support.canary import WORSE_RULES, gate_config, prompt_spec

from gate import gateconfig
from gate.mockllm import MockLLMServer
from gate.states import RolloutStatus
from workers.reconcile import carry_out_pending
from workers.rollout import look
from workers.supervisor import run_until_terminal


@pytest.fixture
def llm(monkeypatch):
    with MockLLMServer(latency_ms=1) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield server


def undecided(gate, tmp_path, hold: bool) -> dict:
    """v1 live, v2 a canary whose rollout ends UNDECIDED at once (no feedback, max_hours ~0.4 s):
    the rollout worker's look asks for it; it stays CANARY until the reconcile step carries
    it out."""
    rollout = {"min_feedback": 100, "max_hours": 0.0001, **({"hold_undecided": True} if hold else {})}
    gateconfig.sync(gate, gate_config(tmp_path, rollout))
    run_until_terminal(gate, [gate.submit(prompt_spec("stable"), "apply")])
    second = gate.submit(prompt_spec("canary", WORSE_RULES), "apply")
    run_until_terminal(gate, [second])
    rollout_id = gate.rollout_of_update(second)["id"]
    time.sleep(0.5)
    assert look(gate.engine, rollout_id) == RolloutStatus.UNDECIDED
    waiting = gate.rollout_of_update(second)
    assert waiting["status"] == RolloutStatus.CANARY and gate.live("p1").version == 2  # not yet carried out
    assert look(gate.engine, rollout_id) is None  # asked once: its request waits
    assert carry_out_pending(gate.engine) == 1
    ended = gate.rollout_of_update(second)
    assert ended["status"] == RolloutStatus.UNDECIDED and gate.live("p1").version == 3
    return ended


def test_an_undecided_canary_is_rolled_back_without_a_hold(mysql_gate, tmp_path, llm):
    gate = mysql_gate
    undecided(gate, tmp_path, hold=False)
    assert gate.holds("p1") == []
    again = gate.submit(prompt_spec("canary", WORSE_RULES), "apply")  # no hold: evaluated again
    assert gate.status(again).update.status in ("PENDING", "RUNNING")


def test_an_undecided_canary_holds_when_its_rollout_says_hold_undecided(mysql_gate, tmp_path, llm):
    gate = mysql_gate
    ended = undecided(gate, tmp_path, hold=True)
    (held,) = gate.holds("p1")
    assert (held.held_version, held.rollback_version, held.actor) == (2, 3, f"rollout {ended['id']}")
    assert "canary v2 undecided: " in held.line()
