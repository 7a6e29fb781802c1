"""Issue 48, findings 1 and 2, through the HTTP service on MariaDB: feedback counts only for
calls a runtime allowed to run the prompt served (call ids under the rollout's call key),
and a runtime token is scoped to its prompts.

Finding 1: a feedback token posted 800 made-up outcomes (v2 all wrong, v1 all right) and
the rollout worker rolled the canary back four seconds later; the answer's ``ignored`` told
it which prompts had no canary."""

from __future__ import annotations

import json
import re
import time

import httpx2
import pytest
from support.canary import SHA, call_key, gate_config, minted, prompt_spec
from support.cli import run_cli
from support.service_harness import TLS

from gate import gateconfig
from gate.mockllm import MockLLMServer
from gate.states import RolloutStatus
from gate.store.feedback import count_feedback, read_raw_tally, read_tally
from workers.rollout import look
from workers.supervisor import run_until_terminal

# the finding's rollout: min_feedback 20, so 400 outcomes an arm decide it at once
ROLLOUT = {"canary_percent": 10, "min_feedback": 20, "max_drop": 0.02, "confidence": 0.95, "max_hours": 1}


@pytest.fixture
def canary(mysql_gate, tmp_path, monkeypatch) -> int:
    """p1 v2 in a canary rollout beside stable v1, started by the CLI on the database."""
    with MockLLMServer(latency_ms=0) as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        gateconfig.sync(mysql_gate, gate_config(tmp_path, ROLLOUT))
        run_until_terminal(mysql_gate, [mysql_gate.submit(prompt_spec("v1"), "apply")])
        second = mysql_gate.submit(prompt_spec("v2"), "apply")
        run_until_terminal(mysql_gate, [second])
    return mysql_gate.rollout_of_update(second)["id"]


def refused_metric(service) -> float:
    with service.client("read") as reader:
        text = reader.get("/metrics").text
    found = re.search(r"^promptgate_feedback_refused_events_total ([0-9.e+]+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


MADE_UP = [{"prompt": "p1", "version": 2, "call_id": f"fake-c-{i}", "correct": False} for i in range(400)] + [
    {"prompt": "p1", "version": 1, "call_id": f"fake-s-{i}", "correct": True} for i in range(400)
]


def test_made_up_call_ids_from_a_feedback_token_move_no_canary(mysql_gate, service, canary):
    """The finding's attack: 800 made-up events. Refused and counted, nothing stored, and the
    rollout worker's look holds the canary; events for a prompt with no canary are refused
    too, so the answer says nothing about which prompts have one."""
    with service.client("feedback") as attacker:
        answer = attacker.post("/v1/feedback", json={"events": MADE_UP})
        probe = attacker.post("/v1/feedback", json={"events": [{**MADE_UP[0], "prompt": "p9"}]})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"recorded": 0, "duplicates": 0, "ignored": 0, "refused": 800}
    assert probe.json() == {"recorded": 0, "duplicates": 0, "ignored": 0, "refused": 1}
    assert look(mysql_gate.engine, canary) == RolloutStatus.CANARY
    assert mysql_gate.rollout_of_update(mysql_gate.rollouts("p1")[0]["update_id"])["status"] == RolloutStatus.CANARY
    with mysql_gate.engine.connect() as conn:
        assert count_feedback(conn, canary) == 0
    assert refused_metric(service) >= 801


def test_ids_minted_without_the_rollouts_key_or_for_another_version_are_refused(mysql_gate, service, canary):
    """A read token loads p1 as before but gets no call key; ids under any other key (a
    guess, another rollout's) or naming another version than the event's do not verify."""
    with service.client("read") as reader:
        plain = reader.get("/v1/prompts/p1/serve").json()
    assert plain["rollout"]["id"] == canary and "call_key" not in plain["rollout"]
    key = call_key(service)
    wrong = (canary, b"\0" * 32)
    other_rollout = (canary + 1, key[1])
    events = [{"prompt": "p1", "version": 2, "call_id": i, "correct": False} for i in minted(wrong, 2, 50)]
    events += [{"prompt": "p1", "version": 2, "call_id": i, "correct": False} for i in minted(other_rollout, 2, 50)]
    events += [{"prompt": "p1", "version": 1, "call_id": i, "correct": True} for i in minted(key, 2, 50)]
    with service.client("feedback") as sender:
        answer = sender.post("/v1/feedback", json={"events": events}).json()
    assert answer == {"recorded": 0, "duplicates": 0, "ignored": 0, "refused": 150}


def test_one_process_cannot_be_most_of_a_decision(mysql_gate, service, canary):
    """Ids under the key count, once each; yet one process's outcomes alone decide nothing
    (max_process_share 0.5: the tally a decision reads caps them), and two processes' do."""
    key = call_key(service)
    events = [
        {"prompt": "p1", "version": 2, "call_id": i, "correct": False} for i in minted(key, 2, 400, "a", spread=1)
    ]
    events += [
        {"prompt": "p1", "version": 1, "call_id": i, "correct": True} for i in minted(key, 1, 400, "a", spread=1)
    ]
    with service.client("runtime") as runtime:
        first = runtime.post("/v1/feedback", json={"events": events}).json()
        again = runtime.post("/v1/feedback", json={"events": events[:100]}).json()
    assert first == {"recorded": 800, "duplicates": 0, "ignored": 0, "refused": 0}
    assert again == {"recorded": 0, "duplicates": 100, "ignored": 0, "refused": 0}
    with mysql_gate.engine.connect() as conn:
        assert read_raw_tally(conn, canary) == {"canary": (400, 0), "stable": (400, 400)}
        assert read_tally(conn, canary) == {"canary": (0, 0), "stable": (0, 0)}
    assert look(mysql_gate.engine, canary) == RolloutStatus.CANARY
    events = [
        {"prompt": "p1", "version": 2, "call_id": i, "correct": False} for i in minted(key, 2, 400, "b", spread=1)
    ]
    events += [
        {"prompt": "p1", "version": 1, "call_id": i, "correct": True} for i in minted(key, 1, 400, "b", spread=1)
    ]
    with service.client("feedback") as relay:  # a feedback token may relay ids a runtime minted
        assert relay.post("/v1/feedback", json={"events": events}).json()["recorded"] == 800
    with mysql_gate.engine.connect() as conn:
        assert read_tally(conn, canary) == {"canary": (800, 0), "stable": (800, 800)}
    assert look(mysql_gate.engine, canary) == RolloutStatus.ROLLED_BACK


def test_a_runtime_token_for_p1_cannot_load_report_or_send_feedback_for_p2(mysql_gate, service, canary):
    key = call_key(service)
    report = {"process_id": "web-1", "host": "web", "pid": 1, "version": 1, "loaded_seconds_ago": 1, "ttl_seconds": 30}
    with service.client("runtime") as runtime:
        assert runtime.get("/v1/prompts/p1/serve").status_code == 200
        for path in ("/v1/prompts/p2/serve", "/v1/prompts/nothing-here/serve"):
            refused = runtime.get(path)
            assert refused.status_code == 403 and "may not run prompt" in refused.json()["error"], refused.text
        assert runtime.post("/v1/served", json={"reports": [{**report, "prompt": "p1"}]}).status_code == 200
        refused = runtime.post("/v1/served", json={"reports": [{**report, "prompt": "p1"}, {**report, "prompt": "p2"}]})
        assert refused.status_code == 403 and "'p2'" in refused.json()["error"], refused.text
        ids = minted(key, 2, 3)
        events = [{"prompt": "p2", "version": 2, "call_id": i, "correct": False} for i in ids]  # p1's ids, as p2
        events += [{"prompt": "p9", "version": 1, "call_id": "x1", "correct": True}]
        answer = runtime.post("/v1/feedback", json={"events": events})
        assert answer.json() == {"recorded": 0, "duplicates": 0, "ignored": 0, "refused": 4}
        assert runtime.get("/v1/updates").status_code == 403  # nothing else: not even a read
    served = mysql_gate.served("p1")["processes"]
    assert [p.process_id for p in served] == ["web-1"]


FORGED_HOST = "<script>alert(1)</script>::warning::x:1"


def forged(version: int = 1) -> dict:
    """The finding's report: another team's read token says a process serves ``version``."""
    return {
        "process_id": "evil-1", "host": FORGED_HOST, "pid": 1, "prompt": "p1", "version": version,
        "loaded_seconds_ago": 999999, "ttl_seconds": 1,
    }  # fmt: skip


def test_a_read_tokens_forged_reports_raise_no_alert_and_fail_no_release_wait(
    mysql_gate, service, tmp_path, monkeypatch
):
    """Finding 2: a read token's `/v1/served` every second set the stale-runtime alert and
    failed the release pipeline's `wait --sha --served` with the forger's host text. Only a
    token that may run the prompt is counted now, and a wait names the reporting token."""
    gate = mysql_gate
    with MockLLMServer(latency_ms=0) as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        gateconfig.sync(gate, gate_config(tmp_path))
        run_until_terminal(gate, [gate.submit(prompt_spec("v1"), "apply", {"sha": SHA[1]})])
        run_until_terminal(gate, [gate.submit(prompt_spec("v2"), "apply", {"sha": SHA[2]})])
    forger = gate.create_token("another-team", "read")
    honest = {
        **forged(2),
        "process_id": "web-1",
        "host": "web",
        "pid": 4242,
        "loaded_seconds_ago": 1,
        "ttl_seconds": 30,
    }
    env = {"PROMPTGATE_TOKEN": service.tokens["read"]}
    wait = ("--gate-url", service.url, "wait", "--sha", SHA[2], "--served", "--timeout", "12")
    with httpx2.Client(base_url=service.url, headers={"Authorization": f"Bearer {forger}"}, verify=TLS) as evil:
        assert evil.post("/v1/served", json={"reports": [forged()]}).status_code == 200  # kept, not counted
        none = run_cli(*wait, env=env)
        assert none.returncode == 1, none.stderr  # no process that may run p1 counted: says so
        assert "no runtime process that may run p1 has reported" in none.stderr and "--allow-none" in none.stderr
        assert FORGED_HOST not in none.stderr and "<script>" not in none.stderr
        assert run_cli(*wait, "--allow-none", env=env).returncode == 0
        with service.client("runtime") as runtime:
            assert runtime.post("/v1/served", json={"reports": [honest]}).json() == {"recorded": 1}
        time.sleep(2.5)  # past twice the forged ttl: the forged row would be stale
        assert evil.post("/v1/served", json={"reports": [forged()]}).status_code == 200
        with service.client("read") as reader:
            metrics = reader.get("/metrics").text
            live = reader.get("/v1/prompts/p1/live").json()["served"]
        done = run_cli(*wait, env=env)
    assert re.search(r"^promptgate_stale_runtime_processes 0\.0$", metrics, re.M), metrics
    assert (live["active"], live["stale"], live["uncounted"]) == (1, 0, 1)
    assert done.returncode == 0, done.stderr
    assert "all 1 processes serve v2" in done.stderr and "<script>" not in done.stderr + done.stdout


def test_a_read_tokens_forged_report_raises_no_stale_runtime_alert(mysql_gate, service, tmp_path, monkeypatch):
    """Finding 2's alert: another team's read token says an old process serves v1 of p1, long
    after v2 went live. It is not counted: no stale process, no alert."""
    gate = mysql_gate
    with MockLLMServer(latency_ms=0) as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        gateconfig.sync(gate, gate_config(tmp_path))
        run_until_terminal(gate, [gate.submit(prompt_spec("v1"), "apply")])
        run_until_terminal(gate, [gate.submit(prompt_spec("v2"), "apply")])
    forger = gate.create_token("another-team", "read")
    time.sleep(2.5)  # v2 live for longer than twice the forged ttl: the forged process would be stale
    with httpx2.Client(base_url=service.url, headers={"Authorization": f"Bearer {forger}"}, verify=TLS) as evil:
        assert evil.post("/v1/served", json={"reports": [forged()]}).status_code == 200
        metrics = evil.get("/metrics").text
        page = evil.get("/workers").text
    assert re.search(r"^promptgate_stale_runtime_processes 0\.0$", metrics, re.M), metrics
    assert "&lt;script&gt;" not in page and "<script>alert" not in page
    assert gate.served_counts() == {"served": 0, "stale": 0}
    live = run_cli("--gate-url", service.url, "live", "p1", env={"PROMPTGATE_TOKEN": service.tokens["read"]})
    assert "no runtime process that may run this prompt has reported" in live.stdout, live.stdout
    assert "1 more reported by tokens that may not run this prompt (read tokens): not counted" in live.stdout
    assert "<script>" not in live.stdout and "::warning" not in live.stdout


def test_a_wait_names_the_reporting_token_never_the_host_it_sent(mysql_gate, service, tmp_path, monkeypatch):
    """A process that may run the prompt and is behind is named by its token and pid."""
    gate = mysql_gate
    with MockLLMServer(latency_ms=0) as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        gateconfig.sync(gate, gate_config(tmp_path))
        run_until_terminal(gate, [gate.submit(prompt_spec("v1"), "apply", {"sha": SHA[1]})])
        run_until_terminal(gate, [gate.submit(prompt_spec("v2"), "apply", {"sha": SHA[2]})])
    behind = {**forged(1), "process_id": "web-2", "ttl_seconds": 30}
    with service.client("runtime") as runtime:
        assert runtime.post("/v1/served", json={"reports": [behind]}).json() == {"recorded": 1}
    env = {"PROMPTGATE_TOKEN": service.tokens["read"]}
    waited = run_cli("--gate-url", service.url, "wait", "--sha", SHA[2], "--served", "--timeout", "3", env=env)
    assert waited.returncode == 3, waited.stderr
    assert f"waiting for {service.names['runtime']}:1 (v1)" in waited.stderr
    assert "<script>" not in waited.stderr and "::warning" not in waited.stderr


def test_a_runtime_token_is_made_with_its_prompts_by_the_cli_and_the_api(mysql_gate, mysql_url, service):
    env = {"PROMPTGATE_DATABASE_URL": mysql_url}
    made = run_cli("token", "create", "checkout-web", "--scope", "runtime", "--prompts", "p1,p2", "--json", env=env)
    assert made.returncode == 0, made.stderr
    assert {k: v for k, v in json.loads(made.stdout).items() if k != "token"} == {
        "name": "checkout-web", "scope": "runtime", "prompts": ["p1", "p2"],
    }  # fmt: skip
    for args, says in (
        (("--scope", "runtime"), "needs --prompts"),
        (("--scope", "read", "--prompts", "p1"), "--prompts is for a runtime token"),
        (("--scope", "runtime", "--prompts", "p1,../x"), "is not a prompt name"),
    ):
        refused = run_cli("token", "create", "bad-one", *args, env=env)
        assert refused.returncode != 0 and says in refused.stderr, refused.stderr
    listed = run_cli("token", "list", env=env)
    assert "checkout-web\truntime (p1,p2)\t" in listed.stdout, listed.stdout
    with service.client("admin") as admin:
        answer = admin.post("/v1/tokens", json={"name": "api-web", "scope": "runtime", "prompts": ["p1"]})
        assert answer.status_code == 201 and answer.json()["prompts"] == ["p1"], answer.text
        missing = admin.post("/v1/tokens", json={"name": "api-web-2", "scope": "runtime"})
        assert missing.status_code == 400 and "needs --prompts" in missing.json()["error"], missing.text
