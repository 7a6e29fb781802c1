"""A run reads the dataset version the gate stored, never the pull request's copy of the
file: a pull request that deletes the rows its prompt fails is still judged on them, and
its comment shows the row diff as a change that takes effect after merge. After the merge,
the push syncs the file as a new version and later checks stand on it."""

from __future__ import annotations

import json

from action_harness import BASE, HEAD1, HEAD2, act, fast, github_env, make_workspace, pr_payload, push_payload, \
    read_outputs, use_candidate
from gate import gateconfig
from gate.mockllm import decide
from gate.spec import load_spec
from gate.templating import render


def mock_answer(spec, row: dict) -> str:
    """The label the local model server gives this row under this prompt."""
    messages = [{"role": m.role, "content": render(m.content, row)} for m in spec.messages]
    return decide(messages)[0]


def test_a_pull_request_cannot_pass_by_deleting_the_rows_it_fails(gate, model, github, tmp_path):
    gate = fast(gate)
    ws = make_workspace(tmp_path)
    gateconfig.sync(gate, ws / "gate.yaml")                          # main's data, stored as versions
    stored = gate.dataset_version("urgency-hard")

    use_candidate(ws, "ticket-urgency-v2-weak")
    spec = load_spec(ws / "prompts" / "ticket-urgency.yaml")
    data = ws / "datasets" / "urgency-hard.jsonl"
    rows = [json.loads(line) for line in data.read_text().splitlines() if line.strip()]
    kept = [r for r in rows if mock_answer(spec, r) == r["expected_decision"]]
    assert 0 < len(kept) < len(rows)
    data.write_text("".join(json.dumps(r) + "\n" for r in kept))     # the PR deletes what it fails
    github.add_pull(14, HEAD1, ["prompts/ticket-urgency.yaml", "datasets/urgency-hard.jsonl"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(14, HEAD1), "m" * 40, "refs/pull/14/merge")

    code, log = act(env, gate, gate_config="gate.yaml")

    assert code == 1, log
    update_id, = json.loads(read_outputs(env["GITHUB_OUTPUT"])["tracking-ids"])
    report = gate.status(update_id)
    assert report.status == "REJECTED"
    hard, = [r for r in report.runs if r.dataset == "urgency-hard"]
    assert (hard.total, hard.dataset_version_id) == (len(rows), stored.id)   # judged on every stored row
    assert hard.matches == len(kept)
    body, = [c["body"] for c in github.comments_on(14)]
    assert f"dataset urgency-hard: {len(rows) - len(kept)} removed against the gate's version {stored.id}" in body
    assert "takes effect after merge" in body
    assert gate.dataset_version("urgency-hard").id == stored.id        # a pull request stores no version

    # merged: the push to main syncs the file as a new version, and the next check stands on it
    github.add_compare(BASE, HEAD2, ["prompts/ticket-urgency.yaml", "datasets/urgency-hard.jsonl"])
    github.add_commit(HEAD2, ["prompts/ticket-urgency.yaml", "datasets/urgency-hard.jsonl"])
    env = github_env(tmp_path, github, ws, "push", push_payload(BASE, HEAD2), HEAD2, "refs/heads/main")
    code, log = act(env, gate, gate_config="gate.yaml")
    newest = gate.dataset_version("urgency-hard")
    assert newest.id != stored.id and newest.row_count == len(kept), log
    pushed, = [gate.status(i) for i in json.loads(read_outputs(env["GITHUB_OUTPUT"])["tracking-ids"])]
    assert {r.dataset: r.dataset_version_id for r in pushed.runs}["urgency-hard"] == newest.id
