"""Every rollback holds (issue 47 point 3), on MariaDB: a canary the rollout worker rolled back
holds its config exactly as a person's rollback does. Re-running the push job's apply of that
config (the real CLI, `submit --mode apply`) is refused in one line naming the rollout and its
figures, until an admin overrides; the hold shows in `history` and `live`. Before issue 47 the
re-run was accepted and the rejected config went live again as a new canary.

An UNDECIDED canary (not enough evidence) is rolled back without a hold, unless its rollout
says ``hold_undecided: true``. And a rollout stays CANARY until its decision is carried out by
the reconcile step, the one writer of the live table."""

from __future__ import annotations

import json
import time

import pytest
from support.canary import SHA, WORSE_RULES, gate_config, prompt_spec, write_prompt
from support.cli import run_cli
from test_canary_end import canary, roll_back

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


def test_the_push_job_s_apply_after_a_canary_rollback_is_refused_naming_the_rollout(mysql_gate, tmp_path, llm):
    gate = mysql_gate
    _, second = canary(gate, tmp_path)
    rollout = roll_back(gate, tmp_path, llm, second)
    assert rollout["status"] == RolloutStatus.ROLLED_BACK, rollout
    assert gate.live("p1").version == 3
    prompt_file = write_prompt(tmp_path / "ws" / "prompts" / "p1.yaml", prompt_spec("canary", WORSE_RULES))
    db = ("--database-url", gate.settings.database_url)

    again = run_cli(*db, "submit", str(prompt_file), "--mode", "apply", "--sha", SHA[2])
    assert again.returncode == 2, again.stdout + again.stderr
    (line,) = again.stderr.strip().splitlines()  # one line
    assert f"v2's config was rolled back by rollout {rollout['id']} at " in line, line
    assert "canary 200/400 (50.0 %) vs stable 1,000/1,000 (100.0 %)" in line, line  # its figures
    assert line.endswith("--override-rollback (admin) to apply it anyway"), line
    assert gate.live("p1").version == 3 and len(gate.list_updates(prompt_name="p1")) == 2

    history = run_cli(*db, "history", "p1").stdout.splitlines()
    assert (
        history[0].startswith("v3 (live)") and "rollback to v1 by rollout worker: canary v2 rolled back" in history[0]
    )
    held = next(line for line in history if line.startswith("v2 "))
    assert f"[held: rolled back by rollout {rollout['id']} at " in held, held
    live = run_cli(*db, "live", "p1")
    assert f"held: v2's config, rolled back by rollout {rollout['id']} (v3)" in live.stdout, live.stdout
    as_json = json.loads(run_cli(*db, "live", "p1", "--json").stdout)
    assert [(h["version"], h["actor"]) for h in as_json["holds"]] == [(2, f"rollout {rollout['id']}")]

    override = run_cli(*db, "submit", str(prompt_file), "--mode", "apply", "--override-rollback")
    assert override.returncode == 0, override.stdout + override.stderr
    assert gate.holds("p1") == []


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
