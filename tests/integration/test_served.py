"""What production serves, on MariaDB with real worker processes and runtime processes, some
on the database and some through the service: each reports what it serves; `promptgate
live`, `GET /v1/prompts/NAME/live`, the status page and /metrics show the versions and how
many processes serve each; a process stuck on an older version than live for longer than
twice its ttl is stale, listed and counted; `wait --sha --served` returns once every
process that reports serves the commit's version. And the runtime through the service:
a conditional read (304, no body, for an unchanged prompt), no database client loaded, and
a service that is down leaves the last version serving and loses no feedback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import httpx2
import pytest
from support.canary import SHA, TRAFFIC, gate_config, prompt_spec, wait_applied, wait_until
from support.cli import ROOT, run_cli
from support.runtime_process import RuntimeFleet
from support.service_harness import TLS, Service
from support.workers_harness import WorkerFleet, worker_env

from gate import gateconfig
from gate.mockllm import MockLLMServer
from gate.runtime import PromptRuntime
from gate.store.feedback import count_feedback, read_raw_tally
from workers.supervisor import run_until_terminal


@pytest.fixture
def llm(monkeypatch):
    with MockLLMServer(latency_ms=1) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield server


@pytest.fixture
def fleets(tmp_path, llm):
    made: list = []

    def runtimes(env: dict):
        fleet = RuntimeFleet(tmp_path, {"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test-key", **env})
        made.append(fleet)
        return fleet

    yield runtimes
    for fleet in made:
        fleet.kill_all()


def served_versions(gate) -> list[tuple]:
    return [(g["version"], g["processes"], g["stale"]) for g in gate.served("p1")["versions"]]


def test_the_fleet_is_listed_a_stale_process_counted_and_wait_served_returns_once_all_serve(
    mysql_gate, service, tmp_path, llm, fleets
):
    """v2 is evaluated with a provider whose key one production process lacks: its refresh
    fails, it keeps serving v1 (as a process whose cache never refreshes would) and keeps
    reporting it: stale. Another refreshes only every 4 s: `wait --served` waits for it."""
    gate = mysql_gate
    providers = {"providers": {"alt": {"base_url": llm.base_url, "api_key_env": "ALT_KEY"}}}
    gateconfig.sync(gate, gate_config(tmp_path, extra=providers))
    workers = WorkerFleet({**worker_env(gate.settings.database_url, llm.base_url), "ALT_KEY": "k"}, tmp_path)
    workers.start(1)
    try:
        wait_applied(gate, gate.submit(prompt_spec("v1"), "apply", {"sha": SHA[1]}))
        keyed, keyless = fleets({"ALT_KEY": "k"}), fleets({})
        common = {"prompt": "p1", "items": TRAFFIC, "keys": 50, "rate": 5, "feedback": False}
        via_service = {"gate_url": service.url, "token": service.tokens["runtime"]}  # counted: it may run p1
        keyed.start(**via_service, ttl=1.0, **common)
        keyed.start(db_url=gate.settings.database_url, ttl=4.0, **common)  # refreshes every 4 s
        keyless.start(**via_service, ttl=1.0, **common)
        wait_until(lambda: served_versions(gate) == [(1, 3, 0)], 30, "three processes reporting v1")
        live = run_cli("--gate-url", service.url, "live", "p1", env={"PROMPTGATE_TOKEN": service.tokens["read"]})
        assert live.returncode == 0 and "served by 3 processes:" in live.stdout and "  v1: 3" in live.stdout

        wait_applied(gate, gate.submit(prompt_spec("v2", provider="alt"), "apply", {"sha": SHA[2]}))
        env = {"PROMPTGATE_TOKEN": service.tokens["read"]}
        started = time.monotonic()
        served = run_cli("--gate-url", service.url, "wait", "--sha", SHA[2], "--served", "--timeout", "8", env=env)
        assert served.returncode == 3, served.stderr  # the keyless process never takes v2
        pid = keyless.stats(0)["pid"]
        assert f":{pid} (v1)" in served.stderr.splitlines()[-1] and "2 of 3 processes serve v2" in served.stderr
        assert time.monotonic() - started >= 7

        stale = wait_until(lambda: [p for p in gate.served("p1")["processes"] if p.stale], 10, "a stale process")
        assert [(p.pid, p.version) for p in stale] == [(pid, 1)] and stale[0].reported_by.startswith("test-runtime-")
        assert served_versions(gate) == [(2, 2, 0), (1, 1, 1)]
        with service.client("read") as reader:
            body = reader.get("/v1/prompts/p1/live").json()
            assert (body["served"]["active"], body["served"]["stale"]) == (3, 1)
            assert [p["pid"] for p in body["served"]["processes"] if p["stale"]] == [pid]
            metrics = reader.get("/metrics").text
            assert "promptgate_stale_runtime_processes 1.0" in metrics and "promptgate_runtime_processes 3.0" in metrics
            assert "Stale (serving an older version" in reader.get("/prompts/p1").text
            assert f'<td class="num">{pid}</td>' in reader.get("/workers").text

        waiter = subprocess.Popen(
            [sys.executable, "-m", "gate.cli", "--gate-url", service.url, "wait", "--sha", SHA[2], "--served",
             "--timeout", "60"],
            env={**os.environ, **env, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(2)
        assert waiter.poll() is None  # still waiting: the stale process reports v1
        keyless.stop(0)  # it stops reporting; after 2 × its ttl it no longer counts
        out, err = waiter.communicate(timeout=60)
        assert waiter.returncode == 0, err
        assert "all 2 processes serve v2" in err
        with service.client("read") as reader:
            assert "promptgate_stale_runtime_processes 0.0" in reader.get("/metrics").text
        stats = [keyed.stop(0), keyed.stop(1)]
        assert all(s["errors"] == 0 for s in stats) and stats[0]["sqlalchemy_loaded"] is False
    finally:
        workers.stop_all()


def test_an_unchanged_prompt_costs_one_round_trip_and_no_body(mysql_gate, service, tmp_path, llm):
    gate = mysql_gate
    gateconfig.sync(gate, gate_config(tmp_path))
    run_until_terminal(gate, [gate.submit(prompt_spec("v1"), "apply")])
    with service.client("read") as reader:
        first = reader.get("/v1/prompts/p1/serve")
        assert first.status_code == 200 and first.json()["version"] == 1
        tag = first.headers["etag"]
        again = reader.get("/v1/prompts/p1/serve", headers={"If-None-Match": tag})
        assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", tag)
        run_until_terminal(gate, [gate.submit(prompt_spec("v2"), "apply")])
        changed = reader.get("/v1/prompts/p1/serve", headers={"If-None-Match": tag})
        assert changed.status_code == 200 and changed.json()["version"] == 2 and changed.headers["etag"] != tag
        assert changed.json()["provider"] is None and "api_key" not in changed.text  # a declaration, never a key
    with httpx2.Client(base_url=service.url, verify=TLS) as anonymous:
        assert anonymous.get("/v1/prompts/p1/serve").status_code == 401


def test_a_runtime_that_cannot_reach_the_service_keeps_serving_and_loses_no_feedback(
    mysql_gate, service, tmp_path, llm
):
    gate = mysql_gate
    rollout = {"canary_percent": 50, "min_feedback": 1_000_000, "max_drop": 0.1, "confidence": 0.95, "max_hours": 1}
    gateconfig.sync(gate, gate_config(tmp_path, rollout))
    run_until_terminal(gate, [gate.submit(prompt_spec("v1"), "apply")])
    second = gate.submit(prompt_spec("v2"), "apply")
    run_until_terminal(gate, [second])
    runtime = PromptRuntime(gate_url=service.url, token=service.tokens["runtime"], ttl=0.2)
    again = None
    try:
        before = [runtime.decide("p1", {"text": "alpha"}, key=f"u{i}") for i in range(20)]
        assert {r.version for r in before} == {1, 2}
        port = service.port
        service.stop()
        time.sleep(0.5)  # past the ttl: every refresh now fails
        during = [runtime.decide("p1", {"text": "alpha"}, key=f"u{i}") for i in range(200)]
        assert {r.version for r in during} == {1, 2} and all(r.decision == "yes" for r in during)
        for result in during:
            assert runtime.feedback(result, correct=True)
        time.sleep(1.0)
        assert runtime.feedback_buffer.pending() == 200  # held, not dropped
        again = Service(gate.settings.database_url, tmp_path, port=port)  # back where the runtime expects it
        assert runtime.feedback_buffer.flush(30)
        assert runtime.feedback_buffer.dropped == 0
        rollout_id = gate.rollout_of_update(second)["id"]
        with gate.engine.connect() as conn:
            assert count_feedback(conn, rollout_id) == 200
            assert sum(n for n, _ in read_raw_tally(conn, rollout_id).values()) == 200
    finally:
        runtime.close()
        if again is not None:
            again.stop()


def report(process: str, version: int, **fields) -> dict:
    row = {"process_id": process, "host": "web-1", "pid": 4242, "prompt": "p1", "version": version}
    return {**row, "loaded_seconds_ago": 1.5, "ttl_seconds": 30, **fields}


def test_reports_are_bounded_and_keyed_by_their_token(mysql_gate, service, tmp_path, llm):
    gate = mysql_gate
    gateconfig.sync(gate, gate_config(tmp_path))
    run_until_terminal(gate, [gate.submit(prompt_spec("v1"), "apply")])
    other = gate.create_token("other-service", "runtime", ["p1"])
    with (
        service.client("runtime") as mine,
        service.client("read") as reader,
        httpx2.Client(base_url=service.url, headers={"Authorization": f"Bearer {other}"}, verify=TLS) as theirs,
    ):
        assert mine.post("/v1/served", json={"reports": [report("web-1-4242", 1)]}).json() == {"recorded": 1}
        assert theirs.post("/v1/served", json={"reports": [report("web-1-4242", 9)]}).json() == {"recorded": 1}
        processes = gate.served("p1")["processes"]
        assert sorted((p.version, p.reported_by) for p in processes) == [
            (1, next(p.reported_by for p in processes if p.reported_by != "other-service")),
            (9, "other-service"),
        ]  # the other token's report is a row of its own, never over mine
        for bad, says in (
            (report("web 1", 1), "process_id"),
            (report("web-1", 0), "version: a whole number"),
            (report("web-1", 1, loaded_seconds_ago=-1), "loaded_seconds_ago"),
            (report("web-1", 1, host="a\nb"), "host: 1-191 printable characters"),
            (report("web-1", 1, prompt="../p1"), "prompt: not a prompt name"),
        ):
            answer = mine.post("/v1/served", json={"reports": [bad]})
            assert answer.status_code == 400 and says in answer.json()["error"], answer.text
        many = [report("web-1", 1, prompt=f"p{i}") for i in range(101)]
        assert reader.post("/v1/served", json={"reports": many}).status_code == 400
        for start in range(0, 999, 100):  # one token speaks for at most 1,000 processes: 999 more
            batch = [report(f"bulk-{i}", 1) for i in range(start, min(start + 100, 999))]
            assert theirs.post("/v1/served", json={"reports": batch}).status_code == 200
        assert theirs.post("/v1/served", json={"reports": [report("bulk-5", 1)]}).status_code == 200  # known: fine
        over = theirs.post("/v1/served", json={"reports": [report("bulk-999", 1)]})
        assert over.status_code == 400 and "already reports for 1,000 processes" in over.json()["error"]
    assert gate.prune(3600).served_reports == 0  # every one of them reported within the hour
    assert gate.prune(0).served_reports == 1001  # silent since before now: all go


def test_a_token_keeps_no_rows_for_prompts_that_are_not_live(mysql_gate, service, tmp_path, llm):
    """Review of issue 39: the bound was 1,000 processes a token, but one process could report
    any number of prompt names, live or not: one read token's single "process" stored 5,000
    active rows for made-up prompts in 50 requests, each counted in
    ``promptgate_runtime_processes`` for two hours. A row is kept only for a prompt with a
    live version, so a token keeps at most 1,000 processes × the live prompts."""
    gate = mysql_gate
    gateconfig.sync(gate, gate_config(tmp_path))
    run_until_terminal(gate, [gate.submit(prompt_spec("v1"), "apply")])
    with service.client("read") as runtime:
        for start in range(0, 300, 100):
            ghosts = [report("one-process", 1, prompt=f"ghost{i}", ttl_seconds=3600) for i in range(start, start + 100)]
            assert runtime.post("/v1/served", json={"reports": ghosts}).status_code == 200
        mixed = [report("one-process", 1, ttl_seconds=3600), report("one-process", 1, prompt="ghost-x")]
        assert runtime.post("/v1/served", json={"reports": mixed}).json() == {"recorded": 1}
        metrics = runtime.get("/metrics").text
    assert gate.served_counts() == {"served": 0, "stale": 0}  # a read token's reports are kept, not counted
    assert re.search(r"^promptgate_runtime_processes 0\.0$", metrics, re.M), metrics
    assert gate.served("p1")["uncounted"] == 1
