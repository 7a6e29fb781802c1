"""`promptgate drift` and the Action's ``mode: drift`` on MariaDB, on the database and through
the service with a read token: each state is found (in-step, differs after a rollback with
who made it and a diff, live-only, file-only, pending, invalid), the exit code is 0 only
when everything is in step, --json says the same, and the Action sets a commit status and
writes the step summary without a comment."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner
from support.action_harness import REPO, TOKEN, github_env, read_outputs
from support.canary import gate_config, prompt_spec, write_prompt
from support.cli import run_cli

from gate import gateconfig
from gate.action import ActionOptions, run_action
from gate.cli import cli
from gate.client.remote import RemoteGate
from gate.mockllm import MockLLMServer
from workers.supervisor import run_until_terminal

SCHEDULE_SHA = "d4" * 20


@pytest.fixture
def llm(monkeypatch):
    with MockLLMServer(latency_ms=0) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield server


def applied(gate, spec) -> int:
    update_id = gate.submit(spec, "apply")
    run_until_terminal(gate, [update_id])
    return update_id


@pytest.fixture
def repo(mysql_gate, tmp_path, llm):
    """A repository whose prompt files are in each state against the gate."""
    gate = mysql_gate
    declared = {"prompts": {p: [{"dataset": "offline", "min_accuracy": 0.9}] for p in ("p1", "p2", "p3", "p5", "p6")}}
    config = gate_config(tmp_path)
    data = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**data, **declared}))
    gateconfig.sync(gate, config)
    applied(gate, prompt_spec("one", name="p1"))
    applied(gate, prompt_spec("A", name="p2"))
    applied(gate, prompt_spec("B", name="p2"))
    gate.rollback("p2", reason="B mislabels refunds", actor="alice")
    applied(gate, prompt_spec("three", name="p3"))
    gate.map_dataset("p4", "offline", "0.9")
    applied(gate, prompt_spec("four", name="p4"))  # another team's prompt: no file here
    gate.unmap_dataset("p4", "offline")
    pending = gate.submit(prompt_spec("six", name="p6"), "apply")  # no worker runs: it stays open
    files = tmp_path / "prompts"
    write_prompt(files / "p1.yaml", prompt_spec("one", name="p1"))
    write_prompt(files / "p2.yaml", prompt_spec("B", name="p2"))
    write_prompt(files / "p5.yaml", prompt_spec("five", name="p5"))
    write_prompt(files / "p6.yaml", prompt_spec("six", name="p6"))
    (files / "broken.yaml").write_text("name: [unclosed\n")
    return tmp_path, config, pending


def states(entries: list[dict]) -> dict[str, str]:
    return {e["prompt"]: e["state"] for e in entries}


def test_drift_finds_each_case_on_the_database_and_through_the_service(mysql_gate, repo, service, monkeypatch):
    root, config, pending = repo
    found = run_cli("drift", "--json", env={"PROMPTGATE_DATABASE_URL": mysql_gate.settings.database_url}, cwd=root)
    assert found.returncode == 1, found.stderr
    entries = json.loads(found.stdout)
    assert states(entries) == {
        "p1": "in-step",
        "p2": "differs",
        "p6": "pending",
        "p5": "file-only",
        "prompts/broken.yaml": "invalid",
        "p3": "live-only",
        "p4": "live-only",
    }
    p2 = next(e for e in entries if e["prompt"] == "p2")
    assert p2["live_version"] == 3 and p2["made_by"] == "rollback to v1 by alice, reason: B mislabels refunds"
    assert "-description: A" in p2["diff"] and "+description: B" in p2["diff"] and p2["diff"][0] == "--- live v3"
    assert next(e for e in entries if e["prompt"] == "p6")["pending"] == [pending]
    assert "applied by update #" in next(e for e in entries if e["prompt"] == "p3")["made_by"]

    # files named one by one are compared alone: not every other live prompt as "live only" (issue 50.6)
    monkeypatch.chdir(root)
    alone = CliRunner().invoke(cli, ["--database-url", mysql_gate.settings.database_url, "drift", "prompts/p2.yaml"])
    assert alone.exit_code == 1, alone.output
    assert alone.output.splitlines()[-1] == "1 differs" and "live-only" not in alone.output, alone.output

    env = {"PROMPTGATE_TOKEN": service.tokens["read"]}
    remote = run_cli("--gate-url", service.url, "drift", "--gate-config", str(config), env=env, cwd=root)
    assert remote.returncode == 1, remote.stderr
    lines = remote.stdout.splitlines()
    assert any(line.startswith("in-step    p1  live v1") for line in lines)
    assert any(line.startswith("differs    p2  live v3 — rollback to v1 by alice") for line in lines)
    assert "    +description: B" in lines and not any(" p4" in line for line in lines)  # not declared: not counted
    assert lines[-1] == "1 in-step, 1 differs, 1 live-only, 1 file-only, 1 pending, 1 invalid"

    only_p1 = root / "p1-only.yaml"
    only_p1.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "prompts": {"p1": [
        {"dataset": "offline", "min_accuracy": 0.9}]}}))  # fmt: skip
    in_step = run_cli(
        "--gate-url", service.url, "drift", "prompts/p1.yaml", "--gate-config", str(only_p1), env=env, cwd=root
    )
    assert in_step.returncode == 0, in_step.stdout + in_step.stderr
    assert in_step.stdout.splitlines()[-1] == "1 in-step"


def test_the_action_in_drift_mode_sets_a_status_and_writes_the_summary_without_a_comment(
    mysql_gate, repo, github, service
):
    root, config, _ = repo
    env = github_env(root, github, root, "schedule", {"schedule": "0 6 * * *"}, SCHEDULE_SHA, "refs/heads/main")
    options = ActionOptions.build(github_token=TOKEN, mode="drift", gate_config=config.name)
    gate = RemoteGate(service.url, service.tokens["read"])  # a scheduled job's read token: no database
    try:
        code = run_action(env, gate, options)
    finally:
        gate.close()
    assert code == 1
    assert [(s["sha"], s["state"], s["context"]) for s in github.repo.statuses] == [
        (SCHEDULE_SHA, "failure", "prompt-gate drift")
    ]
    assert github.repo.commit_comments == [] and github.repo.issue_comments == {}
    summary = (root / "run-0" / "summary.md").read_text()
    assert "## prompt-gate drift: drift between the repository and live" in summary
    assert "| p2 | **differs** | v3 | rollback to v1 by alice, reason: B mislabels refunds |" in summary
    assert "```diff" in summary and "+description: B" in summary
    assert read_outputs(root / "run-0" / "output")["status"] == "drift"
    assert REPO == github.repo.full_name
