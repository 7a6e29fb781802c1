"""Every rollback holds (issue 47 point 3), on MariaDB: a canary the rollout worker rolled back
holds its config exactly as a person's rollback does. Re-running the push job's apply of that
config (the real CLI, `submit --mode apply`) is refused in one line naming the rollout and its
figures, until an admin overrides; the hold shows in `history` and `live`. Before issue 47 the
re-run was accepted and the rejected config went live again as a new canary.

An UNDECIDED canary: ``test_canary_undecided.py``."""

from __future__ import annotations

import json

import pytest
from support.canary import SHA, WORSE_RULES, prompt_spec, write_prompt
from support.cli import run_cli
from test_canary_end import canary, roll_back

from gate.mockllm import MockLLMServer
from gate.states import RolloutStatus
from workers.supervisor import run_until_terminal


@pytest.fixture
def llm(monkeypatch):
    with MockLLMServer(latency_ms=1) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield server


def test_the_push_job_s_apply_after_a_canary_rollback_is_refused_naming_the_rollout(mysql_gate, service, tmp_path, llm):
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

    with service.client("read") as web:  # the status page and the API show the hold too
        page, api = web.get("/prompts/p1").text, web.get("/v1/prompts/p1/history").json()
    assert "held</span>" in page and f"rolled back by rollout {rollout['id']}" in page
    assert api[1]["hold"]["actor"] == f"rollout {rollout['id']}" and api[0]["by_rollout"]["id"] == rollout["id"]

    rows = json.loads(run_cli(*db, "history", "p1", "--json").stdout)
    by = rows[0]["by_rollout"]  # the history says which rollout rolled it back, and on what
    assert (by["id"], by["status"]) == (rollout["id"], "ROLLED_BACK")
    assert by["figures"]["canary"]["n"] == 400
    assert f"(rollout {rollout['id']} ROLLED_BACK)" in history[0]

    override = run_cli(*db, "submit", str(prompt_file), "--mode", "apply", "--override-rollback")
    assert override.returncode == 0, override.stdout + override.stderr
    assert len(gate.holds("p1")) == 1  # held until the override is applied (a cancelled one leaves it)
    (report,) = run_until_terminal(gate, [int(override.stdout.strip())])
    assert report.status == "APPLIED" and gate.holds("p1") == []
    top = run_cli(*db, "history", "p1").stdout.splitlines()[0]
    assert top.startswith("v4 (live)") and "applied over a rollback's hold: --override-rollback" in top, top
