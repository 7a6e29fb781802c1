"""Issue 35, the Action in this process against a fake GitHub: no success about what was not
judged (an ungated prompt on a pull request and on the merge push; a new prompt judged on the
bars its pull request proposes, labelled so), the push job's record of each commit that
`wait --sha` answers from, a bad dataset file failing the pull request, and the gate or
GitHub down (one line, an error status, no retry storm). tests/acceptance/test_action_act.py
runs the same flows through a real runner engine."""

from __future__ import annotations

import json
import socket
import time

import yaml
from support.action_harness import (
    BASE,
    HEAD1,
    HEAD2,
    act,
    fast,
    github_env,
    make_workspace,
    pr_payload,
    push_payload,
    read_outputs,
)
from support.migrated import migrated

from gate import gateconfig
from gate.client.remote import RemoteGate
from gate.contract.release import EXIT_NOTHING_TO_GATE
from gate.domain import Gate

UNGATED = "name: ungated\nmodel: m\nmessages:\n  - {role: user, content: hi}\n"


def setup(tmp_path, sqlite_url):
    gate = fast(Gate.connect(migrated(sqlite_url), upgrade=True))
    ws = make_workspace(tmp_path)
    gateconfig.sync(gate, ws / "gate.yaml")  # what main synced earlier
    return gate, ws


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_ungated_prompt_is_never_a_success(tmp_path, github, sqlite_url, model):
    """It was a warning, a ✅ comment and a success status on the pull request, and
    `skipped (exit 0)` on the merge push: it merged and never went live, and nobody was told."""
    gate, ws = setup(tmp_path, sqlite_url)
    (ws / "prompts" / "ungated.yaml").write_text(UNGATED)
    github.add_pull(5, HEAD1, ["prompts/ungated.yaml"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(5, HEAD1), "m" * 40, "refs/pull/5/merge")
    code, log = act(env, gate, gate_config="gate.yaml")
    assert code == 2 and read_outputs(env["GITHUB_OUTPUT"])["status"] == "invalid", log
    state = github.repo.statuses[-1]
    assert state["state"] == "failure" and state["description"].startswith(
        "prompts/ungated.yaml: prompt ungated is not gated: the gate has no bars for it; add them to gate.yaml"
    )
    assert "✅" not in github.comments_on(5)[0]["body"]

    github.add_compare(BASE, HEAD2, ["prompts/ungated.yaml"])
    env = github_env(tmp_path, github, ws, "push", push_payload(BASE, HEAD2), HEAD2, "refs/heads/main")
    code, log = act(env, gate, gate_config="gate.yaml")
    assert code == 2 and github.repo.statuses[-1]["state"] == "failure", log
    record = gate.commit_record(HEAD2)
    assert record.outcome == "not-gated" and "prompt ungated is not gated" in record.detail
    said = []
    assert gate.wait_for_sha(HEAD2, timeout=5, on_select=said.append) == (2, [])
    assert said == [f"commit {HEAD2[:12]}: not gated: {record.detail}"]
    gate.close()


def test_a_push_that_changes_no_prompt_is_recorded_as_nothing_to_gate(tmp_path, github, sqlite_url, model):
    gate, ws = setup(tmp_path, sqlite_url)
    github.add_compare(BASE, HEAD1, ["README.md"])
    env = github_env(tmp_path, github, ws, "push", push_payload(BASE, HEAD1), HEAD1, "refs/heads/main")
    code, log = act(env, gate, gate_config="gate.yaml")
    assert code == 0 and "commit " + HEAD1[:12] + " recorded: nothing" in log, log
    assert github.repo.statuses[-1]["description"] == "no prompt changed"
    assert gate.wait_for_sha(HEAD1)[0] == EXIT_NOTHING_TO_GATE  # no timeout: the record answers at once
    gate.close()


def test_a_new_prompt_is_judged_on_the_bars_its_pull_request_proposes(tmp_path, github, sqlite_url, model):
    """Its bars arrive in the same pull request: checked on them (a pull request never sets
    the gate's bars), labelled so, never a ✅; the merge push syncs, then applies on them."""
    gate, ws = setup(tmp_path, sqlite_url)
    (ws / "prompts" / "ticket-new.yaml").write_text(
        (ws / "prompts" / "ticket-urgency.yaml").read_text().replace("name: ticket-urgency", "name: ticket-new")
    )
    cfg = yaml.safe_load((ws / "gate.yaml").read_text())
    cfg["prompts"]["ticket-new"] = [{"dataset": "urgency-regression", "min_accuracy": 0.5}]
    (ws / "gate.yaml").write_text(yaml.safe_dump(cfg))
    github.add_pull(6, HEAD1, ["prompts/ticket-new.yaml", "gate.yaml"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(6, HEAD1), "m" * 40, "refs/pull/6/merge")
    code, log = act(env, gate, gate_config="gate.yaml")
    assert code == 0, log
    (uid,) = json.loads(read_outputs(env["GITHUB_OUTPUT"])["tracking-ids"])
    report = gate.status(uid)
    assert report.status == "PASSED" and report.update.source["proposed_bars"] is True
    assert gate.mappings("ticket-new") == []  # the pull request set no bar
    body = github.comments_on(6)[0]["body"]
    assert "☑️ prompt-gate" in body and "ticket-new: PASSED on the proposed bars" in body and "✅" not in body
    assert "on the bars this PR proposes" in github.repo.statuses[-1]["description"]

    github.add_compare(BASE, HEAD2, ["prompts/ticket-new.yaml", "gate.yaml"])
    env = github_env(tmp_path, github, ws, "push", push_payload(BASE, HEAD2), HEAD2, "refs/heads/main")
    code, log = act(env, gate, gate_config="gate.yaml")
    assert code == 0 and read_outputs(env["GITHUB_OUTPUT"])["status"] == "applied", log
    assert gate.live("ticket-new").version == 1 and gate.commit_record(HEAD2).outcome == "submitted"
    gate.close()


def test_a_bad_dataset_file_fails_the_pull_request(tmp_path, github, sqlite_url, model):
    gate, ws = setup(tmp_path, sqlite_url)
    path = ws / "datasets" / "urgency-regression.csv"
    path.write_text(path.read_text().replace("expected_decision", "expected", 1))
    github.add_pull(8, HEAD1, ["datasets/urgency-regression.csv"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(8, HEAD1), "m" * 40, "refs/pull/8/merge")
    code, log = act(env, gate, gate_config="gate.yaml")
    assert code == 2, log
    assert (
        "::error file=datasets/urgency-regression.csv,line=1,title=prompt-gate::"
        "datasets.urgency-regression.label_column: datasets/urgency-regression.csv: line 1: no label column "
        "'expected_decision' in the header" in log
    )
    assert github.repo.statuses[-1]["state"] == "failure"
    gate.close()


def test_the_gate_down_is_an_error_status_and_one_line(tmp_path, github, sqlite_url, model):
    ws = make_workspace(tmp_path)
    github.add_pull(9, HEAD1, ["prompts/ticket-urgency.yaml"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(9, HEAD1), "m" * 40, "refs/pull/9/merge")
    url = f"http://127.0.0.1:{closed_port()}"
    code, log = act(env, RemoteGate(url, "t0ken"), gate_config="gate.yaml", run_workers=False)
    assert code == 2 and "Traceback" not in log, log
    assert f"::error title=prompt-gate::the gate could not be reached: cannot reach the gate at {url}" in log
    assert [(s["state"], s["description"]) for s in github.repo.statuses] == [
        ("error", "the gate could not be reached")
    ]
    assert read_outputs(env["GITHUB_OUTPUT"])["status"] == "unreachable"


def test_github_down_is_one_line_without_a_retry_storm(tmp_path, sqlite_url, model):
    gate, ws = setup(tmp_path, sqlite_url)
    fake = type("Down", (), {"base_url": f"http://127.0.0.1:{closed_port()}"})()
    env = github_env(tmp_path, fake, ws, "pull_request", pr_payload(9, HEAD1), "m" * 40, "refs/pull/9/merge")
    started = time.monotonic()
    code, log = act(env, gate, gate_config="gate.yaml")
    assert code == 2 and time.monotonic() - started < 5 and "Retrying" not in log, log
    lines = [line for line in log.splitlines() if line.startswith("::error")]
    assert lines == [
        f"::error title=prompt-gate::GitHub: listing the files of pull request #9 failed: cannot reach "
        f"{fake.base_url}/repos/acme/prompts/pulls/9/files (Connection error)"
    ], log
    gate.close()
