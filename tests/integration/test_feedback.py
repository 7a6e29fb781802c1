"""Production's feedback on MariaDB through the service: a call counts once however often it
is sent, an event counts only for a rollout in progress of its prompt's versions, a request
is bounded, and feedback at 2,000 events a second from 8 runtime processes is all recorded,
each process's events in batches (requests and transactions counted)."""

from __future__ import annotations

import re
import time

import pytest
from support.canary import call_key, gate_config, minted, prompt_spec
from support.cli import run_cli
from support.runtime_process import RuntimeFleet

from gate import gateconfig
from gate.mockllm import MockLLMServer
from gate.store.feedback import count_feedback, read_raw_tally
from workers.supervisor import run_until_terminal

ROLLOUT = {"canary_percent": 10, "min_feedback": 10_000_000, "max_drop": 0.02, "confidence": 0.95, "max_hours": 1}


def start_canary(gate, tmp_path, monkeypatch, submitted_by: str | None = None) -> int:
    """p1 v2 in a canary rollout beside stable v1 that no feedback here can decide, v2's
    apply submitted by the token ``submitted_by`` (None: the CLI on the database)."""
    with MockLLMServer(latency_ms=0) as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        gateconfig.sync(gate, gate_config(tmp_path, ROLLOUT))
        run_until_terminal(gate, [gate.submit(prompt_spec("v1"), "apply")])
        second = gate.submit(prompt_spec("v2"), "apply", submitted_by=submitted_by)
        run_until_terminal(gate, [second])
    return gate.rollout_of_update(second)["id"]


@pytest.fixture
def canary(mysql_gate, tmp_path, monkeypatch):
    return start_canary(mysql_gate, tmp_path, monkeypatch)


def stored(gate, rollout_id: int) -> tuple[int, dict]:
    with gate.engine.connect() as conn:
        return count_feedback(conn, rollout_id), read_raw_tally(conn, rollout_id)


def test_a_call_counts_once_and_only_for_the_rollouts_versions(mysql_gate, service, canary):
    key = call_key(service)  # ids a runtime on a runtime token mints (made-up ones: test_feedback_authority.py)
    events = [
        {"prompt": "p1", "version": 2, "call_id": c, "correct": i % 3 != 0} for i, c in enumerate(minted(key, 2, 30))
    ]
    events += [{"prompt": "p1", "version": 1, "call_id": c, "correct": True} for c in minted(key, 1, 20, start=100)]
    with service.client("feedback") as production:
        first = production.post("/v1/feedback", json={"events": events})
        assert first.status_code == 200
        assert first.json() == {"recorded": 50, "duplicates": 0, "ignored": 0, "refused": 0}
        again = production.post("/v1/feedback", json={"events": events[:10] + events[40:]})
        assert again.json() == {"recorded": 0, "duplicates": 20, "ignored": 0, "refused": 0}
        other = [
            {"prompt": "p1", "version": 7, "call_id": minted(key, 7, 1)[0], "correct": True},  # not the rollout's
            {"prompt": "p9", "version": 1, "call_id": minted(key, 1, 1, start=999)[0], "correct": False},  # p1's id
        ]
        told = production.post("/v1/feedback", json={"events": other}).json()  # p9's canary, or none: not told
        assert (told["ignored"], told["refused"]) == (1, 1), told
        too_many = [
            {"prompt": "p1", "version": 2, "call_id": c, "correct": True} for c in minted(key, 2, 1001, start=5000)
        ]
        refused = production.post("/v1/feedback", json={"events": too_many})
        assert refused.status_code == 400
        for bad, says in (
            ({"prompt": "p1", "version": 2, "call_id": "a b", "correct": True}, "call_id"),
            ({"prompt": "p1", "version": 2, "call_id": "ok", "correct": "yes"}, "correct: true or false"),
            ({"prompt": "P 1", "version": 2, "call_id": "ok", "correct": True}, "prompt: not a prompt name"),
        ):
            answer = production.post("/v1/feedback", json={"events": [bad]})
            assert answer.status_code == 400 and says in answer.json()["error"], answer.text
    with service.client("admin") as admin:  # admin may send feedback too (submit: for its own rollouts, below)
        one = {**events[0], "call_id": minted(key, 2, 1, "admin-proc")[0]}
        assert admin.post("/v1/feedback", json={"events": [one]}).json()["recorded"] == 1
    count, tally = stored(mysql_gate, canary)
    assert count == 51 and tally == {"canary": (31, 20), "stable": (20, 20)}
    with service.client("read") as reader:  # the prompt's page: the rollout in progress and its interval now
        page = reader.get("/prompts/p1").text
    assert "Canary rollout in progress" in page and "v1 stable 90 % / v2 canary 10 % of calls" in page
    assert '<td>canary v2</td><td class="num">31</td><td class="num">20</td>' in page
    assert "always-valid bounds (each one-sided at 95 %) [" in page
    live = run_cli("--gate-url", service.url, "live", "p1", env={"PROMPTGATE_TOKEN": service.tokens["read"]})
    assert f"rollout {canary} CANARY: canary v2 at 10 % beside stable v1: canary 20/31, stable 20/20" in live.stdout


MADE_UP = [{"prompt": "p1", "version": 2, "call_id": f"pr-c{i}", "correct": False} for i in range(500)] + [
    {"prompt": "p1", "version": 1, "call_id": f"pr-s{i}", "correct": True} for i in range(500)
]


def test_a_submit_token_cannot_decide_a_rollout_another_tokens_apply_started(mysql_gate, service, canary):
    """A pull request's submit token sent made-up outcomes (the canary all wrong, the stable
    version all right) and the rollout worker rolled back a canary the operator's apply had
    started. A submit token's events count only for rollouts its own applies started: these
    are refused, and nothing of them is stored."""
    with service.client("submit") as ci:
        answer = ci.post("/v1/feedback", json={"events": MADE_UP})
    assert answer.status_code == 200
    assert answer.json() == {"recorded": 0, "duplicates": 0, "ignored": 0, "refused": 1000}
    assert stored(mysql_gate, canary) == (0, {"canary": (0, 0), "stable": (0, 0)})


def test_a_submit_token_sends_feedback_for_the_rollout_its_apply_started(mysql_gate, service, tmp_path, monkeypatch):
    """The issue's promise: production may send feedback with the submit token whose apply
    started the rollout (a dedicated feedback token is the better choice: it can do nothing else)."""
    own = start_canary(mysql_gate, tmp_path, monkeypatch, submitted_by=service.names["submit"])
    key = call_key(service)  # the calls a runtime on a runtime token served
    events = [{**e, "call_id": c} for e, c in zip(MADE_UP[:3], minted(key, 2, 3), strict=True)]
    events += [{**e, "call_id": c} for e, c in zip(MADE_UP[-2:], minted(key, 1, 2, start=10), strict=True)]
    with service.client("submit") as release:
        answer = release.post("/v1/feedback", json={"events": events})
    assert answer.json() == {"recorded": 5, "duplicates": 0, "ignored": 0, "refused": 0}, answer.text
    assert stored(mysql_gate, own) == (5, {"canary": (3, 0), "stable": (2, 2)})


def test_feedback_at_2000_a_second_from_8_processes_is_all_recorded_in_batches(mysql_gate, service, canary, tmp_path):
    fleet = RuntimeFleet(tmp_path, {"OPENAI_API_KEY": "unused"})
    # 8 × 250 = 2,000 events a second, for 5 s: the rate is what is checked (each request a batch of
    # a 0.2 s flush's events: 25 rounds a process), not the length, and each second of it costs
    # ~1.2 s of CPU (the service's inserts, 8 processes minting ids)
    per_process, rate = 1250, 250
    with service.client("read") as reader:
        before = feedback_requests(reader.get("/metrics").text)
    started = time.monotonic()
    for _ in range(8):
        fleet.start(
            gate_url=service.url,
            token=service.tokens["runtime"],  # its load carries the call key: its ids verify (issue 48)
            prompt="p1",
            ttl=30.0,
            events=per_process,
            rate=rate,
        )
    stats = [fleet.finish(n) for n in range(8)]
    elapsed = time.monotonic() - started
    assert all(
        s["done"] and s["feedback"] == {"sent": per_process, "dropped": 0, "refused": 0, "flushed": True} for s in stats
    ), stats
    assert max(s["offered_seconds"] for s in stats) < 1.6 * per_process / rate  # each kept up with its 250 a second
    count, tally = stored(mysql_gate, canary)
    assert count == 8 * per_process == sum(n for n, _ in tally.values())
    assert sum(k for _, k in tally.values()) == 8 * per_process * 9 // 10
    with service.client("read") as reader:
        metrics_text = reader.get("/metrics").text
        requests = feedback_requests(metrics_text) - before
    assert requests <= 8 * per_process / 25, requests  # batches of 25 events or more: one transaction each
    closing = max(s["close_seconds"] for s in stats)
    said = f"{8 * per_process} events from 8 processes in {elapsed:.1f} s; {requests:.0f} requests"
    print(f"\n{said}; the last flush took {closing:.1f} s")


def feedback_requests(metrics: str) -> float:
    found = re.search(
        r'promptgate_http_requests_total\{method="POST",route="/feedback",status="200"\} ([0-9.e+]+)', metrics
    )
    return float(found.group(1)) if found else 0.0


def test_prune_takes_the_feedback_of_decided_rollouts_and_keeps_their_figures(mysql_gate, canary):
    events = [{"prompt": "p1", "version": 2, "call_id": f"c{i}", "correct": True} for i in range(120)]
    assert mysql_gate.record_feedback(events)["recorded"] == 120
    assert mysql_gate.prune(0).feedback == 0  # a rollout in progress keeps every outcome
    mysql_gate.rollback("p1", reason="enough", actor="ops")  # ends it SUPERSEDED
    assert mysql_gate.prune(0).feedback == 120
    count, tally = stored(mysql_gate, canary)
    assert count == 0 and tally["canary"] == (120, 120)
