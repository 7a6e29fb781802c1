"""The local model server: its answer policy follows the prompt, it is deterministic, it
speaks enough of the OpenAI API, and the example prompts score as the demo needs."""

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
import yaml
from support.cli import ROOT

from gate import mockllm
from gate.mockllm import FaultPlan, MockLLMServer, decide, parse_rules

EXAMPLES = ROOT / "prompts-example"


def post(base_url, body, *, raw=None, headers=None, timeout=5):
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(
        base_url + "/chat/completions",
        data=data,
        method="POST",
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read()), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), dict(exc.headers)


def get(url):
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def chat(system, user, **extra):
    return {
        "model": "any-model",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        **extra,
    }


def answer_of(payload):
    return payload["choices"][0]["message"]["content"]


@pytest.fixture(scope="module")
def server():
    with MockLLMServer() as s:
        yield s


# ----------------------------------------------------------------------------- policy

RULES = """You triage tickets. Answer urgent or routine.

Rules:
- urgent: outage, site is down, "can't log in", refund*
* routine: password reset.
default: routine
"""


def test_rule_syntax():
    policy = parse_rules(RULES)
    assert [(r.label, r.keywords) for r in policy.rules] == [
        ("urgent", ("outage", "site is down", "can't log in", "refund*")),
        ("routine", ("password reset",)),
    ]
    assert policy.default == "routine" and policy.labels == ("urgent", "routine")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("We have an OUTAGE", "urgent"),
        ("the site   is\ndown for everyone", "urgent"),  # any whitespace inside a phrase
        ("I can\u2019t log in", "urgent"),  # curly apostrophe
        ("I want my money refunded", "urgent"),  # prefix keyword
        ("the website is downloading slowly", "routine"),  # whole words only
        ("outages are common", "routine"),  # no prefix without *
        ("How do I do a password reset?", "routine"),
        ("hello", "routine"),  # default line
    ],
)
def test_policy_matches_whole_words_case_insensitively(text, expected):
    assert parse_rules(RULES).answer(text) == expected


def test_first_matching_rule_wins_and_fallbacks():
    exception_first = "- routine: no rush\n- urgent: outage\ndefault: urgent"
    assert parse_rules(exception_first).answer("outage last week, no rush") == "routine"
    assert parse_rules(exception_first).answer("outage now") == "urgent"
    assert parse_rules("- yes: refund\n- no: question").answer("hello") == "no"  # last rule
    assert parse_rules("no rules here").answer("hello") == "unknown"
    assert parse_rules("- not eligible: final sale\n- eligible: damaged").answer("final sale") == "not eligible"


def test_rules_come_from_the_system_message_only():
    messages = [
        {"role": "system", "content": "- yes: apple\ndefault: no"},
        {"role": "user", "content": "- yes: pear\nI like pears"},
    ]
    assert decide(messages)[0] == "no"
    messages[1]["content"] = [{"type": "text", "text": "an apple a day"}]  # content parts
    assert decide(messages)[0] == "yes"


def test_editing_the_prompt_changes_the_answer(server):
    ticket = "Customers cannot sign in since this morning"
    before = "- urgent: outage, down\ndefault: routine"
    after = "- urgent: outage, down, cannot sign in\ndefault: routine"
    assert answer_of(post(server.base_url, chat(before, ticket))[1]) == "routine"
    assert answer_of(post(server.base_url, chat(after, ticket))[1]) == "urgent"


def test_json_response_formats(server):
    rules = "- yes: apple\ndefault: no"
    status, body, _ = post(server.base_url, chat(rules, "apple", response_format={"type": "json_object"}))
    assert json.loads(answer_of(body)) == {"decision": "yes"}
    schema = {
        "type": "json_schema",
        "json_schema": {
            "name": "d",
            "schema": {"type": "object", "properties": {"label": {"type": "string"}, "why": {"type": "string"}}},
        },
    }
    status, body, _ = post(server.base_url, chat(rules, "pear", response_format=schema))
    assert json.loads(answer_of(body)) == {"label": "no"}


# ----------------------------------------------------------------------------- protocol


def test_completion_shape_and_usage(server):
    status, body, _ = post(server.base_url, chat("- yes: apple\ndefault: no", "one two three"))
    assert status == 200 and body["object"] == "chat.completion" and body["model"] == "any-model"
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 3 + 5, "completion_tokens": 1, "total_tokens": 9}


def test_models_stats_health_and_errors(server):
    models = get(server.base_url + "/models")
    assert models["object"] == "list" and models["data"][0]["id"] == "mock-llm"
    root = server.base_url.rsplit("/v1", 1)[0]
    assert get(root + "/health") == {"status": "ok"}
    assert set(get(root + "/stats")) == {"requests", "outcomes", "in_flight", "max_in_flight"}
    assert post(server.base_url, None, raw=b"{not json")[0] == 400
    assert post(server.base_url, {"model": "m", "messages": []})[0] == 400
    assert post(server.base_url, {"messages": [{"role": "user", "content": "x"}]})[0] == 400
    assert post(server.base_url, chat("x", "y", stream=True))[0] == 400
    status, body, _ = post(server.base_url, chat("x", "y", model="mock-error-418"))
    assert status == 418 and body["error"]["type"] == "forced_error"
    with pytest.raises(urllib.error.HTTPError) as info:
        get(server.base_url + "/nowhere")
    assert info.value.code == 404


def test_api_key_option():
    with MockLLMServer(api_key="sk-1") as s:
        assert post(s.base_url, chat("x", "y"))[0] == 401
        assert post(s.base_url, chat("x", "y"), headers={"Authorization": "Bearer sk-1"})[0] == 200
        assert s.stats()["outcomes"] == {"unauthorized": 1, "ok": 1}


# ----------------------------------------------------------------------------- faults and determinism


def outcome_sequence(seed, n=40):
    with MockLLMServer(seed=seed, error_rate=0.2, garbage_rate=0.3) as s:
        out = []
        for _ in range(n):
            status, body, _ = post(s.base_url, chat("- yes: apple\ndefault: no", "apple"))
            out.append(status if status != 200 else answer_of(body))
        return out


def test_same_seed_same_faults():
    first = outcome_sequence(7)
    assert first == outcome_sequence(7)
    assert first != outcome_sequence(8)
    assert {500, "yes"} <= set(first) and set(first) - {500, "yes"}  # some garbage too


def test_answers_are_deterministic(server):
    body = chat(RULES, "Is the site is down for everyone?")
    answers = {answer_of(post(server.base_url, body)[1]) for _ in range(5)}
    assert answers == {"urgent"}


def test_rate_limit_window():
    plan = FaultPlan(rate_limit_rpm=2)
    assert plan.rate_limited(now=100.0) is None
    assert plan.rate_limited(now=110.0) is None
    assert plan.rate_limited(now=120.0) == pytest.approx(40.0)  # until the first slot frees
    assert plan.rate_limited(now=160.5) is None  # 100 left the window
    with pytest.raises(ValueError):
        FaultPlan(error_rate=0.7, garbage_rate=0.5)
    with pytest.raises(ValueError):
        FaultPlan(timeout_rate=1.5)


def test_rate_limit_over_http():
    with MockLLMServer(rate_limit_rpm=1) as s:
        assert post(s.base_url, chat("x", "y"))[0] == 200
        status, body, headers = post(s.base_url, chat("x", "y"))
    assert status == 429 and body["error"]["code"] == "rate_limit_exceeded"
    assert 55 <= int(headers["Retry-After"]) <= 60 and 55000 <= int(headers["retry-after-ms"]) <= 60000


def test_latency_and_jitter():
    with MockLLMServer(latency_ms=150, jitter_ms=50) as s:
        started = time.monotonic()
        post(s.base_url, chat("x", "y"))
        assert 0.15 <= time.monotonic() - started < 1.5


def test_latency_counts_from_the_request_not_after_the_servers_own_work(monkeypatch):
    """A provider at 200 ms answers 200 ms after the request, however long the stand-in
    takes to prepare the answer (here 80 ms, within the latency)."""
    decide = mockllm.decide
    monkeypatch.setattr(mockllm, "decide", lambda messages: time.sleep(0.08) or decide(messages))
    with MockLLMServer(latency_ms=200) as s:
        times = []
        for _ in range(3):
            started = time.monotonic()
            assert post(s.base_url, chat("x", "y"))[0] == 200
            times.append(time.monotonic() - started)
    assert 0.2 <= min(times) < 0.25, times


def test_stop_is_fast_with_requests_hanging():
    s = MockLLMServer(timeout_rate=1.0, hang_seconds=60).start()
    errors = []

    def hang():
        try:
            post(s.base_url, chat("x", "y"), timeout=30)
        except Exception as exc:  # the connection is closed without an answer
            errors.append(exc)

    threads = [threading.Thread(target=hang) for _ in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while s.stats()["in_flight"] < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert s.stats()["outcomes"] == {"timeout": 4}
    started = time.monotonic()
    s.stop()
    for t in threads:
        t.join(5)
    assert time.monotonic() - started < 2 and len(errors) == 4


def test_serve_forever_as_a_process():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gate.mockllm", "--port", "0", "--latency-ms", "1"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        line = proc.stdout.readline()
        base_url = line.split("listening on ", 1)[1].split()[0]
        assert (
            post(base_url, chat("- yes: apple\ndefault: no", "apple"))[1]["choices"][0]["message"]["content"] == "yes"
        )
        assert get(base_url.rsplit("/v1", 1)[0] + "/stats")["outcomes"] == {"ok": 1}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ----------------------------------------------------------------------------- the example prompts


def read_rows(path):
    if path.suffix == ".csv":
        with open(path, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def predict(spec, row):
    """What the call path answers for a row with the mock as the model, computed without HTTP
    (render -> the mock's policy -> parse_decision); the test checks a sample over HTTP."""
    from gate.calls.llm import render_messages
    from gate.kinds.label import parse_decision

    answer, _ = decide(render_messages(spec, item_of(row)))
    return parse_decision(spec, spec.labels, answer)


def item_of(row):
    return {k: v for k, v in row.items() if k not in ("item_id", "expected_decision")}


def test_example_datasets_are_well_formed():
    config = yaml.safe_load((EXAMPLES / "gate.yaml").read_text())
    for name, ds in config["datasets"].items():
        rows = read_rows(EXAMPLES / ds["source"])
        ids = [r["item_id"] for r in rows]
        assert len(ids) == len(set(ids)), name
        assert all(r.get("expected_decision") or isinstance(r.get("expected"), dict) for r in rows), name
        # a judge's labelled replies (an answer column): enough for its agreement and the default 40 sentinels
        limits = (
            (60, 120)
            if "regression" in name or "answer" in rows[0]
            else (24, 40)
            if "expected" in rows[0]
            else (12, 20)
        )
        assert limits[0] <= len(rows) <= limits[1], (name, len(rows))


# (prompt file, dataset) -> does it clear the bar in gate.yaml
DEMO_EXPECTATIONS = {
    ("prompts/ticket-urgency.yaml", "urgency-regression"): True,
    ("prompts/ticket-urgency.yaml", "urgency-hard"): True,
    ("candidates/ticket-urgency-v2-weak.yaml", "urgency-regression"): True,
    ("candidates/ticket-urgency-v2-weak.yaml", "urgency-hard"): False,
    ("candidates/ticket-urgency-v2.yaml", "urgency-regression"): True,
    ("candidates/ticket-urgency-v2.yaml", "urgency-hard"): True,
    ("prompts/refund-eligibility.yaml", "refund-regression"): True,
    ("prompts/refund-eligibility.yaml", "refund-hard"): True,
}


def test_example_prompts_score_as_the_demo_needs(monkeypatch, server):
    from gate.calls.llm import call_prompt
    from gate.prompt.spec import load_spec
    from gate.settings import Settings

    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    config = yaml.safe_load((EXAMPLES / "gate.yaml").read_text())
    settings = Settings(request_timeout=10)
    seen = {}
    for (path, dataset), clears in DEMO_EXPECTATIONS.items():
        spec = load_spec(EXAMPLES / path)
        bar = next(b["min_accuracy"] for b in config["prompts"][spec.name] if b["dataset"] == dataset)
        rows = read_rows(EXAMPLES / config["datasets"][dataset]["source"])
        predictions = [predict(spec, row) for row in rows]
        acc = sum(p == row["expected_decision"] for p, row in zip(predictions, rows)) / len(rows)
        seen[(path, dataset)] = acc
        assert (acc >= bar) == clears, (path, dataset, acc, bar)
        for row, predicted in list(zip(rows, predictions))[::9]:  # the same over HTTP
            assert call_prompt(spec, item_of(row), settings=settings).decision == predicted
    # the better candidate is better on the hard cases than the live prompt
    assert (
        seen[("candidates/ticket-urgency-v2.yaml", "urgency-hard")]
        > seen[("prompts/ticket-urgency.yaml", "urgency-hard")]
    )


def _raw(server, request: bytes) -> bytes:
    import socket

    with socket.create_connection((server.host, server.port), timeout=5) as s:
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def test_raw_http_requests_are_parsed_and_bad_ones_refused(server):
    body = json.dumps(
        {
            "model": "mock-1",
            "messages": [{"role": "system", "content": "default: no"}, {"role": "user", "content": "x"}],
        }
    ).encode()
    ok = _raw(
        server,
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"CONTENT-LENGTH: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body,
    )
    assert ok.startswith(b"HTTP/1.1 200") and b'"content": "no"' in ok
    assert _raw(server, b"GARBAGE\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert _raw(server, b"GET /health HTTP/1.1\r\nno colon here\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert _raw(server, b"GET /health HTTP/1.1\r\n" + b"x-long: " + b"a" * 70000 + b"\r\n\r\n").startswith(
        b"HTTP/1.1 431"
    )
