"""A run reads the dataset version the gate stored, never the pull request's copy of the
file: a pull request that deletes the rows its prompt fails is still judged on them, and
its comment shows the row diff as a change that takes effect after merge. After the merge,
the push syncs the file as a new version and later checks stand on it."""

from __future__ import annotations

import json

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
    use_candidate,
)

from gate import gateconfig
from gate.mockllm import decide
from gate.prompt.spec import load_spec
from gate.prompt.templating import render


def mock_answer(spec, row: dict) -> str:
    """The label the local model server gives this row under this prompt."""
    messages = [{"role": m.role, "content": render(m.content, row)} for m in spec.messages]
    return decide(messages)[0]


def test_a_pull_request_cannot_pass_by_deleting_the_rows_it_fails(gate, model, github, tmp_path):
    gate = fast(gate)
    ws = make_workspace(tmp_path)
    gateconfig.sync(gate, ws / "gate.yaml")  # main's data, stored as versions
    stored = gate.dataset_version("urgency-hard")

    use_candidate(ws, "ticket-urgency-v2-weak")
    spec = load_spec(ws / "prompts" / "ticket-urgency.yaml")
    data = ws / "datasets" / "urgency-hard.jsonl"
    rows = [json.loads(line) for line in data.read_text().splitlines() if line.strip()]
    kept = [r for r in rows if mock_answer(spec, r) == r["expected_decision"]]
    assert 0 < len(kept) < len(rows)
    data.write_text("".join(json.dumps(r) + "\n" for r in kept))  # the PR deletes what it fails
    github.add_pull(14, HEAD1, ["prompts/ticket-urgency.yaml", "datasets/urgency-hard.jsonl"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(14, HEAD1), "m" * 40, "refs/pull/14/merge")

    code, log = act(env, gate, gate_config="gate.yaml")

    assert code == 1, log
    (update_id,) = json.loads(read_outputs(env["GITHUB_OUTPUT"])["tracking-ids"])
    report = gate.status(update_id)
    assert report.status == "REJECTED"
    (hard,) = [r for r in report.runs if r.dataset == "urgency-hard"]
    assert (hard.total, hard.dataset_version_id) == (len(rows), stored.id)  # judged on every stored row
    # answered wrong on rows the pull request deleted (every row it kept is answered right);
    # answers are written back as they come, so early stop may end the run before every row
    # is called
    assert hard.scored > hard.matches and hard.matches <= len(kept)
    (body,) = [c["body"] for c in github.comments_on(14)]
    assert f"dataset urgency-hard: {len(rows) - len(kept)} removed against the gate's version {stored.label}" in body
    assert stored.label == "v1"
    assert "takes effect after merge" in body
    assert gate.dataset_version("urgency-hard").id == stored.id  # a pull request stores no version

    # merged: the push to main syncs the file as a new version, and the next check stands on it
    github.add_compare(BASE, HEAD2, ["prompts/ticket-urgency.yaml", "datasets/urgency-hard.jsonl"])
    github.add_commit(HEAD2, ["prompts/ticket-urgency.yaml", "datasets/urgency-hard.jsonl"])
    env = github_env(tmp_path, github, ws, "push", push_payload(BASE, HEAD2), HEAD2, "refs/heads/main")
    code, log = act(env, gate, gate_config="gate.yaml")
    newest = gate.dataset_version("urgency-hard")
    assert newest.id != stored.id and newest.row_count == len(kept), log
    (pushed,) = [gate.status(i) for i in json.loads(read_outputs(env["GITHUB_OUTPUT"])["tracking-ids"])]
    assert {r.dataset: r.dataset_version_id for r in pushed.runs}["urgency-hard"] == newest.id
    assert newest.label == "v2" and {r.dataset: r.dataset_version_number for r in pushed.runs}["urgency-hard"] == 2


def test_a_linked_dataset_file_is_refused_and_never_read(gate, model, github, tmp_path):
    """A pull request replaces a dataset file by a link to a file outside its checkout
    (a token file, another repository's data): nothing of it reaches the comment."""
    gate = fast(gate)
    ws = make_workspace(tmp_path)
    gateconfig.sync(gate, ws / "gate.yaml")
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"item_id": "ghp_SECRET_TOKEN", "expected_decision": "urgent", "text": "x"}\n')
    data = ws / "datasets" / "urgency-hard.jsonl"
    data.unlink()
    data.symlink_to(secret)  # the registered file, now a link
    other = tmp_path / "other.csv"
    other.write_text("item_id,expected_decision,text\nAKIA_SECRET_KEY,urgent,x\n")
    (ws / "datasets" / "extra.csv").symlink_to(other)  # a new link, declared for a registered name
    cfg = yaml.safe_load((ws / "gate.yaml").read_text())
    cfg["datasets"]["urgency-regression"] = {"source": "datasets/extra.csv"}
    (ws / "gate.yaml").write_text(yaml.safe_dump(cfg))
    use_candidate(ws, "ticket-urgency-v2")
    github.add_pull(
        15, HEAD1, ["prompts/ticket-urgency.yaml", "datasets/urgency-hard.jsonl", "datasets/extra.csv", "gate.yaml"]
    )
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(15, HEAD1), "m" * 40, "refs/pull/15/merge")

    code, log = act(env, gate, gate_config="gate.yaml")

    (body,) = [c["body"] for c in github.comments_on(15)]
    for secret_text in ("ghp_SECRET_TOKEN", "AKIA_SECRET_KEY"):
        assert secret_text not in body and secret_text not in log
    assert "a symbolic link" in body or "a symbolic link" in log


def test_a_pull_request_cannot_compare_its_file_with_a_dataset_the_repository_does_not_hold(
    gate, model, github, tmp_path
):
    """A holdout registered from outside the repository (not by the gate config): a pull
    request that declares a dataset of that name on a file of its own learns nothing of the
    holdout's rows (no diff against it is shown)."""
    gate = fast(gate)
    ws = make_workspace(tmp_path)
    gateconfig.sync(gate, ws / "gate.yaml")
    private = tmp_path / "private"
    private.mkdir()
    (private / "holdout.csv").write_text(
        "item_id,expected_decision,text\nHIDDEN-1,urgent,site down\nHIDDEN-2,routine,invoice\n"
    )
    gate.register_dataset("holdout", "holdout.csv", base_dir=private)  # by an admin, from elsewhere
    (ws / "holdout.csv").write_text("item_id,expected_decision,text\nguess-1,urgent,x\n")
    cfg = yaml.safe_load((ws / "gate.yaml").read_text())
    cfg["datasets"]["holdout"] = {"source": "holdout.csv"}
    (ws / "gate.yaml").write_text(yaml.safe_dump(cfg))
    use_candidate(ws, "ticket-urgency-v2")
    github.add_pull(16, HEAD1, ["prompts/ticket-urgency.yaml", "gate.yaml", "holdout.csv"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(16, HEAD1), "m" * 40, "refs/pull/16/merge")

    act(env, gate, gate_config="gate.yaml")

    (body,) = [c["body"] for c in github.comments_on(16)]
    assert "HIDDEN" not in body
    assert "dataset holdout:" not in body or "against the gate's version" not in body
