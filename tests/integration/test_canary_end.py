"""The canary's end is part of the verdict (issue 46 point 7), on MariaDB with real workers,
the local model server, the service and the real CLI: an update APPLIED whose canary the
rollout worker rolled back reads so in `status` (text and --json), `report` (the PR
comment's Markdown) and the status page, never a ✅ APPLIED; `wait ID` and `wait --sha`
exit 1 with the reason. While the canary is in progress it reads "canary in progress" and
`wait ID` still exits 0 (3 with `--until promoted` at its timeout).

Fast: v1 and v2 are judged by the roles in this process (``run_until_terminal``), the
feedback is stored through the gate as production's runtimes send it, and one real worker
process (the rollout worker among its roles) decides."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator
from support.action_harness import TOKEN, github_env, push_payload
from support.canary import SHA, WORSE_RULES, gate_config, prompt_spec, wait_until, write_prompt
from support.cli import run_cli
from support.workers_harness import WorkerFleet, worker_env

from gate import gateconfig
from gate.action.inputs import ActionOptions
from gate.action.run import run_action
from gate.client.remote import RemoteGate
from gate.mockllm import MockLLMServer
from gate.schemas import status_schema
from gate.states import RolloutStatus
from workers.supervisor import run_until_terminal

ROLLOUT = {"canary_percent": 10, "min_feedback": 100, "max_drop": 0.2, "confidence": 0.95, "max_hours": 1}


@pytest.fixture
def llm(monkeypatch):
    with MockLLMServer(latency_ms=1) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield server


def canary(gate, tmp_path) -> tuple[int, int]:
    """v1 live at 100 %, then v2 (worse in production) APPLIED as a canary: (v1's update, v2's)."""
    gateconfig.sync(gate, gate_config(tmp_path, ROLLOUT))
    first = gate.submit(prompt_spec("stable"), "apply", {"sha": SHA[1]})
    run_until_terminal(gate, [first])
    second = gate.submit(prompt_spec("canary", WORSE_RULES), "apply", {"sha": SHA[2]})
    (report,) = run_until_terminal(gate, [second])
    assert report.status == "APPLIED" and gate.rollout_of_update(second)["status"] == RolloutStatus.CANARY
    return first, second


def roll_back(gate, tmp_path, llm, update_id: int) -> dict:
    """Production's feedback shows the canary worse (half right against all right); a real
    worker process decides."""
    events = [{"prompt": "p1", "version": 2, "call_id": f"c{i}", "correct": i % 2 == 0} for i in range(400)]
    events += [{"prompt": "p1", "version": 1, "call_id": f"s{i}", "correct": True} for i in range(1000)]
    assert gate.record_feedback(events[:1000])["recorded"] + gate.record_feedback(events[1000:])["recorded"] == 1400
    fleet = WorkerFleet(worker_env(gate.settings.database_url, llm.base_url, rollout_interval=0.2), tmp_path)
    fleet.start(1)
    try:
        return wait_until(
            lambda: (r := gate.rollout_of_update(update_id)) and r["status"] != RolloutStatus.CANARY and r,
            60,
            "the rollout worker's decision",
        )
    finally:
        fleet.stop_all()


def test_a_canary_in_progress_is_no_final_applied_and_wait_id_still_exits_0(mysql_gate, service, tmp_path, llm):
    gate = mysql_gate
    _, second = canary(gate, tmp_path)
    gate.record_feedback([{"prompt": "p1", "version": 2, "call_id": f"c{i}", "correct": True} for i in range(30)])
    gate.record_feedback([{"prompt": "p1", "version": 1, "call_id": f"s{i}", "correct": True} for i in range(60)])
    with service.client("read") as web:
        prompt_page, listed = web.get("/prompts/p1").text, web.get("/").text
        api = web.get("/v1/updates", params={"prompt": "p1"}).json()
    # issue 49.5: who serves what, not "live version 2"; the feedback towards min_feedback
    assert "v1 stable 90 %</strong> / <strong>v2 canary 10 %" in prompt_page, prompt_page
    assert "Live version <strong>2" not in prompt_page
    assert '<progress max="100" value="30"></progress> 30 of the 100 outcomes each version needs' in prompt_page
    row = next(r for r in listed.split("<tr>") if f'href="/updates/{second}"' in r)
    assert 'st-quiet" data-live="badge">APPLIED</span> → <span class="badge st-canary' in row, row
    assert {u["id"]: u["outcome"] for u in api}[second] == "CANARY"
    db = ("--database-url", gate.settings.database_url)
    during = run_cli(*db, "status", second)
    assert during.returncode == 0, during.stdout + during.stderr
    assert "APPLIED → CANARY" in during.stdout and "canary in progress (rollout" in during.stdout
    assert "10 % of traffic" in during.stdout
    assert run_cli(*db, "wait", second, "--no-progress").returncode == 0
    until = run_cli(*db, "wait", second, "--until", "promoted", "--timeout", "0.5", "--no-progress")
    assert until.returncode == 3, until.stdout + until.stderr
    markdown = run_cli(*db, "report", second).stdout
    assert "### 🐤 p1: APPLIED, canary in progress" in markdown and "✅" not in markdown.splitlines()[0], markdown[:400]


def test_a_canary_rolled_back_is_no_applied_in_any_output(mysql_gate, service, tmp_path, llm):
    gate = mysql_gate
    _, second = canary(gate, tmp_path)
    db = ("--database-url", gate.settings.database_url)
    rollout = roll_back(gate, tmp_path, llm, second)
    assert rollout["status"] == RolloutStatus.ROLLED_BACK, rollout

    said = f"applied, then rolled back by rollout {rollout['id']}: canary 50.0 % (400 outcomes) vs stable 100.0 %"
    text = run_cli(*db, "status", second)
    assert text.returncode == 1, text.stdout + text.stderr
    first_line = text.stdout.splitlines()[0]
    assert "APPLIED → ROLLED_BACK" in first_line and not first_line.endswith("APPLIED"), first_line
    assert said in text.stdout and "the stable version v1 serves again" in text.stdout

    as_json = run_cli(*db, "status", second, "--json")
    doc = json.loads(as_json.stdout)
    assert as_json.returncode == 1
    assert (doc["status"], doc["outcome"]) == ("APPLIED", "ROLLED_BACK")  # the state machine's state stays
    assert said in doc["outcome_sentence"] and doc["rollout"]["canary"] == {"n": 400, "correct": 200}
    Draft202012Validator(status_schema()).validate(doc)

    markdown = run_cli(*db, "report", second).stdout
    heading = next(line for line in markdown.splitlines() if line.startswith("### "))
    assert "✅" not in heading and heading.endswith("p1: APPLIED, then rolled back"), heading
    assert said in markdown and not markdown.splitlines()[0].startswith("## ✅"), markdown[:300]

    waited = run_cli(*db, "wait", second, "--no-progress")
    assert waited.returncode == 1 and said in waited.stdout, waited.stdout + waited.stderr
    until = run_cli(*db, "wait", second, "--until", "promoted", "--timeout", "5", "--no-progress")
    assert until.returncode == 1 and "rollout ROLLED_BACK" in until.stderr, until.stdout + until.stderr
    env = {"PROMPTGATE_TOKEN": service.tokens["read"]}
    by_sha = run_cli("--gate-url", service.url, "wait", "--sha", SHA[2], "--timeout", "5", env=env)
    assert by_sha.returncode == 1 and said in by_sha.stdout, by_sha.stdout + by_sha.stderr

    badge = 'class="badge st-rolled_back" data-live="badge">ROLLED_BACK'
    with service.client("read") as web:
        page, listed, prompt_page = (web.get(path).text for path in (f"/updates/{second}", "/", "/prompts/p1"))
        api = web.get("/v1/updates", params={"prompt": "p1"}).json()
    assert badge in page and said in page
    # issue 49.5: APPLIED offline, never green beside a canary rolled back, nor "every bar cleared" alone
    assert 'st-quiet" data-live="badge">APPLIED</span> → <span class="badge st-rolled_back' in page
    assert "APPLIED offline, then rolled back in production</strong> — offline: every bar cleared" in page
    for html in (listed, prompt_page):  # the lists: its row has the badge beside a quiet APPLIED
        row = next(r for r in html.split("<tr>") if f'href="/updates/{second}"' in r and ">APPLIED</span>" in r)
        assert 'st-quiet" data-live="badge">APPLIED</span> → <span class="badge st-rolled_back' in row, row
        assert "st-applied" not in row and "then rolled back</strong> — offline: every bar cleared" in row, row
    assert [(u["id"], u["status"], u["outcome"]) for u in api if u["id"] == second] == [
        (second, "APPLIED", "ROLLED_BACK")
    ]
    history = prompt_page.split("<h2>History</h2>")[1].split("<h2>")[0]
    assert history.count(rollout["reason"]) == 1, history  # the rollback's reason said once


def test_the_action_s_next_look_says_on_github_that_the_canary_was_rolled_back(
    mysql_gate, service, tmp_path, llm, github
):
    """The push job said ✅ on the commit; after the rollback the release job's `mode: wait`
    (a read token for the gate, the job's token for GitHub) sets the commit's prompt-gate
    status to a failure and comments, and the scheduled `mode: drift` marks the commit that
    applied it."""
    gate = mysql_gate
    _, second = canary(gate, tmp_path)
    rollout = roll_back(gate, tmp_path, llm, second)
    said = f"applied, then rolled back by rollout {rollout['id']}: canary 50.0 %"
    ws = tmp_path / "ws"
    write_prompt(ws / "prompts" / "p1.yaml", prompt_spec("canary", WORSE_RULES))  # the merged file: v2
    release_env = github_env(tmp_path, github, ws, "push", push_payload(SHA[1], SHA[2]), SHA[2], "refs/heads/main")
    released = run_cli(
        "--gate-url", service.url, "action", "--mode", "wait", "--timeout", "10",
        env={**release_env, "PROMPTGATE_TOKEN": service.tokens["read"], "GITHUB_TOKEN": TOKEN},
    )  # fmt: skip
    assert released.returncode == 1, released.stdout + released.stderr
    assert said in released.stdout and "exit 1" in released.stdout
    statuses = [(s["sha"], s["state"], s["context"], s["description"]) for s in github.repo.statuses]
    assert [s[:3] for s in statuses] == [(SHA[2], "failure", "prompt-gate")], statuses
    assert statuses[0][3].startswith("p1 applied, then rolled back by rollout"), statuses
    (comment,) = github.repo.commit_comments
    assert comment["sha"] == SHA[2] and said in comment["body"] and "APPLIED, then rolled back" in comment["body"]

    drift_env = github_env(tmp_path, github, ws, "schedule", {"schedule": "0 6 * * *"}, SHA[3], "refs/heads/main")
    remote = RemoteGate(service.url, service.tokens["read"])
    try:
        code = run_action(drift_env, remote, ActionOptions.build(github_token=TOKEN, mode="drift"))
    finally:
        remote.close()
    assert code == 1
    looked = [(s["sha"], s["state"], s["context"]) for s in github.repo.statuses[1:]]
    assert looked == [(SHA[3], "failure", "prompt-gate drift"), (SHA[2], "failure", "prompt-gate")], looked
