"""The call path against a real MockLLMServer over HTTP: answers, each fault class and its
classification, concurrency; and the production runtime's use of the same function."""

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

import gate.calls.llm
import gate.calls.providers
import gate.runtime
from gate.calls.llm import INVALID_DECISION, CallResult, call_prompt, get_client, retry_after_seconds
from gate.calls.providers import Endpoint
from gate.errors import ModelCallError, NotFound
from gate.mockllm import MockLLMServer
from gate.prompt.spec import parse_spec
from gate.settings import Settings

SETTINGS = Settings(request_timeout=5.0)
SYSTEM = """Answer urgent or routine.
- urgent: outage, site is down, can't log in
default: routine"""


_DECLARED: dict = {}


@pytest.fixture(autouse=True)
def declared_providers(monkeypatch):
    """Each test's providers, declared in PROMPTGATE_PROVIDERS (restored afterwards)."""
    _DECLARED.clear()
    monkeypatch.setenv("PROMPTGATE_PROVIDERS", "{}")


def make_spec(
    base_url,
    *,
    model="gpt-test",
    labels=("urgent", "routine"),
    system=SYSTEM,
    user="{{ item.text }}",
    api_key_env=None,
    **extra,
):
    """A prompt that names a provider declared (in this process's environment) at base_url."""
    name = f"mock-{len(_DECLARED)}"
    _DECLARED[name] = {"base_url": base_url, **({"api_key_env": api_key_env} if api_key_env else {})}
    os.environ["PROMPTGATE_PROVIDERS"] = json.dumps(_DECLARED)
    data = {
        "name": "urgency",
        "model": model,
        "labels": list(labels),
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "provider": name,
    }
    data.update(extra)
    return parse_spec(data)


@pytest.fixture(scope="module")
def server():
    with MockLLMServer() as s:
        yield s


@pytest.fixture
def clean(server):
    server.reset_stats()
    return server


def expect_error(spec, item=None, settings=SETTINGS) -> ModelCallError:
    with pytest.raises(ModelCallError) as info:
        call_prompt(spec, item or {"text": "hello"}, settings=settings)
    return info.value


# ----------------------------------------------------------------------------- answers


def test_normal_answer(clean):
    spec = make_spec(clean.base_url)
    result = call_prompt(spec, {"text": "Total outage since 9am"}, settings=SETTINGS)
    assert isinstance(result, CallResult)
    assert result.decision == "urgent" and result.valid and result.raw_output == "urgent"
    assert result.prompt_tokens > 5 and result.completion_tokens == 1
    assert 0 <= result.latency_ms < 5000
    assert call_prompt(spec, {"text": "How do I change my logo?"}, settings=SETTINGS).decision == "routine"


def test_rendered_messages_and_params_reach_the_server(clean):
    spec = make_spec(
        clean.base_url,
        user="Subject: {{ item.subject }}\n{{ item.text }}",
        params={"temperature": 0, "max_tokens": 3, "stop": ["\n"], "seed": 1},
        response_format={"type": "json_object"},
        decision={"type": "json"},
    )
    result = call_prompt(spec, {"subject": "Help", "text": "can't log in"}, settings=SETTINGS)
    assert result.decision == "urgent" and result.raw_output == '{"decision": "urgent"}'
    sent = clean.recent_requests()[-1]
    assert sent["model"] == "gpt-test"
    assert sent["messages"][1] == {"role": "user", "content": "Subject: Help\ncan't log in"}
    assert sent["temperature"] == 0 and sent["max_tokens"] == 3 and sent["stop"] == ["\n"]
    assert sent["seed"] == 1 and sent["response_format"] == {"type": "json_object"}


def test_garbage_is_an_invalid_decision_not_an_error():
    with MockLLMServer(garbage_rate=1.0) as s:
        result = call_prompt(make_spec(s.base_url), {"text": "outage"}, settings=SETTINGS)
    assert result.decision == INVALID_DECISION and not result.valid
    assert result.raw_output not in ("urgent", "routine") and result.raw_output


def test_template_problem_is_permanent(clean):
    err = expect_error(make_spec(clean.base_url, user="{{ item.subject }}"), {"text": "x"})
    assert not err.retryable and err.kind == "template" and "subject" in str(err)
    err = expect_error(make_spec(clean.base_url, user="{% if item.n > 3 %}big{% endif %}"), {"n": "5"})
    assert not err.retryable and err.kind == "template"
    assert clean.stats()["requests"] == 0  # nothing was sent


# ----------------------------------------------------------------------------- faults


def test_server_error_is_retryable_and_not_retried_by_the_sdk():
    with MockLLMServer(error_rate=1.0) as s:
        err = expect_error(make_spec(s.base_url))
        assert s.stats()["requests"] == 1  # max_retries=0: the executor owns retries
    assert err.retryable and err.status_code == 500 and err.kind == "server"


def test_rate_limit_is_retryable_with_retry_after():
    with MockLLMServer(rate_limit_rpm=2) as s:
        spec = make_spec(s.base_url)
        call_prompt(spec, {"text": "a"}, settings=SETTINGS)
        call_prompt(spec, {"text": "b"}, settings=SETTINGS)
        err = expect_error(spec)
        assert s.stats()["outcomes"] == {"ok": 2, "rate_limited": 1}
    assert err.retryable and err.status_code == 429 and err.kind == "rate_limit"
    assert 55 <= err.retry_after <= 60


def test_timeout_is_retryable_and_the_server_stops_fast():
    s = MockLLMServer(timeout_rate=1.0, hang_seconds=30).start()
    try:
        started = time.monotonic()
        err = expect_error(make_spec(s.base_url), settings=Settings(request_timeout=0.3))
        assert time.monotonic() - started < 3
        assert err.retryable and err.kind == "timeout" and err.status_code is None
    finally:
        stopping = time.monotonic()
        s.stop()
        assert time.monotonic() - stopping < 2  # the hanging handler woke up


def test_connection_refused_is_retryable():
    with MockLLMServer() as s:
        dead_url = s.base_url
    err = expect_error(make_spec(dead_url), settings=Settings(request_timeout=2))
    assert err.retryable and err.kind == "connection"


@pytest.mark.parametrize(
    "status, retryable, kind",
    [
        (400, False, "bad_request"),
        (401, False, "auth"),
        (403, False, "auth"),
        (404, False, "bad_request"),
        (422, False, "bad_request"),
        (408, True, "timeout"),
        (502, True, "server"),
        (503, True, "server"),
    ],
)
def test_http_status_classification(clean, status, retryable, kind):
    err = expect_error(make_spec(clean.base_url, model=f"mock-error-{status}"))
    assert (err.status_code, err.retryable, err.kind) == (status, retryable, kind)
    # a fixed form: the status and the provider's error type, never its free text
    assert str(err) == f"HTTP {status} from provider mock-0 (forced_error)"


def test_wrong_api_key_is_permanent(monkeypatch):
    with MockLLMServer(api_key="sk-right") as s:
        monkeypatch.setenv("GATE_TEST_KEY", "sk-wrong")
        spec = make_spec(s.base_url, api_key_env="GATE_TEST_KEY")
        err = expect_error(spec)
        assert (err.status_code, err.retryable, err.kind) == (401, False, "auth")
        monkeypatch.setenv("GATE_TEST_KEY", "sk-right")
        assert call_prompt(spec, {"text": "outage"}, settings=SETTINGS).decision == "urgent"
        monkeypatch.delenv("GATE_TEST_KEY")
        err = expect_error(spec)
        assert not err.retryable and err.kind == "config" and "GATE_TEST_KEY" in str(err)


def test_endpoint_from_environment(monkeypatch, clean):
    monkeypatch.setenv("OPENAI_BASE_URL", clean.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    spec = parse_spec(
        {
            "name": "p",
            "model": "m",
            "labels": ["urgent", "routine"],
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "{{ item.text }}"}],
        }
    )
    assert gate.calls.llm.resolve_endpoint(spec) == Endpoint(
        "default", clean.base_url, gate.calls.providers.PLACEHOLDER_API_KEY, "from OPENAI_BASE_URL"
    )
    assert call_prompt(spec, {"text": "site is down"}, settings=SETTINGS).decision == "urgent"


# ----------------------------------------------------------------------------- concurrency


def test_concurrent_calls_overlap():
    with MockLLMServer(latency_ms=200) as s:
        spec = make_spec(s.base_url)
        call_prompt(spec, {"text": "warm-up"}, settings=SETTINGS)
        items = [{"text": "outage" if i % 2 else "a question"} for i in range(32)]
        started = time.monotonic()
        with ThreadPoolExecutor(32) as pool:
            results = list(pool.map(lambda item: call_prompt(spec, item, settings=SETTINGS), items))
        elapsed = time.monotonic() - started
        assert s.stats()["max_in_flight"] >= 16
    assert [r.decision for r in results] == ["urgent" if i % 2 else "routine" for i in range(32)]
    assert elapsed < 2.0, f"32 calls at 200 ms took {elapsed:.2f}s: they did not run in parallel"


def test_one_client_per_endpoint_shared_by_threads():
    clients = set()
    lock = threading.Lock()

    def grab():
        c = get_client("http://127.0.0.1:9/v1", "k", 3.0)
        with lock:
            clients.add(id(c))

    threads = [threading.Thread(target=grab) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(clients) == 1
    assert get_client("http://127.0.0.1:9/v1", "k", 4.0) is not get_client("http://127.0.0.1:9/v1", "k", 3.0)
    assert get_client("http://127.0.0.1:9/v1", "k", 3.0).max_retries == 0


# ----------------------------------------------------------------------------- Retry-After

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "headers, expected",
    [
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"Retry-After": "Wed, 01 May 2024 12:00:30 GMT"}, 30.0),
        ({"Retry-After": "Wed, 01 May 2024 11:00:00 GMT"}, 0.0),  # in the past
        ({"Retry-After": "-3"}, 0.0),
        ({"Retry-After": "whenever"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_retry_after_parsing(headers, expected):
    assert retry_after_seconds(headers, now=NOW) == expected


def test_retry_after_http_date_relative_to_now():
    when = datetime.now(UTC) + timedelta(seconds=120)
    value = retry_after_seconds({"Retry-After": when.strftime("%a, %d %b %Y %H:%M:%S GMT")})
    assert 115 <= value <= 121


# ----------------------------------------------------------------------------- runtime


def test_runtime_uses_the_same_call_path():
    assert gate.runtime.call_prompt is gate.calls.llm.call_prompt


class FakeGate:
    """Stands in for gate.domain.Gate (the DB-backed test lives with the service)."""

    def __init__(self, config):
        self.config, self.version, self.calls, self.fail = config, 1, 0, False

    def live(self, name):
        self.calls += 1
        if self.fail:
            raise RuntimeError("database unavailable")
        if name != self.config["name"]:
            raise NotFound(f"no live prompt {name}")
        return SimpleNamespace(
            name=name, version=self.version, config=self.config, config_hash=f"h{self.version}", updated_at=None
        )

    def endpoint(self, spec):
        return gate.calls.llm.resolve_endpoint(spec)

    def live_endpoint(self, live, spec):
        return self.endpoint(spec), True

    def canary_of(self, name):  # no canary rollout in progress
        return None


def test_runtime_reads_the_live_version_with_a_ttl(clean):
    config = make_spec(clean.base_url).to_config()
    fake = FakeGate(config)
    rt = gate.runtime.PromptRuntime(ttl=60, gate=fake, settings=SETTINGS)
    p = rt.prompt("urgency")
    assert p.version == 1 and p.labels == ("urgent", "routine")
    assert p.decide({"text": "outage"}).decision == "urgent"
    assert rt.decide("urgency", {"text": "hi"}).decision == "routine"
    assert fake.calls == 1  # cached
    fake.version = 2
    assert p.version == 1
    rt.ttl = 0  # expired: re-read
    assert p.version == 2 and fake.calls >= 2
    fake.fail = True
    assert p.version == 2  # stale beats down
    with pytest.raises(NotFound):
        gate.runtime.PromptRuntime(gate=FakeGate(config)).prompt("missing")


# ----------------------------------------------------------------------------- odd answers


class _Canned:
    """A bare HTTP server that answers every POST with one canned status, type and body."""

    def __init__(self, body: bytes, content_type: str = "application/json"):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize(
    "body, content_type",
    [
        (b'{"id": "x", "choices": []}', "application/json"),
        (b'{"id": "x"}', "application/json"),
        (b'{"choices": [{"message": null}]}', "application/json"),
        (b"[1, 2]", "application/json"),
        (b'{"choices": [{"message": {"content": "urg', "application/json"),
        (b"<html>gateway</html>", "text/html"),
    ],
)
def test_an_answer_without_a_message_is_a_retryable_bad_response(body, content_type):
    canned = _Canned(body, content_type)
    try:
        err = expect_error(make_spec(canned.url))
    finally:
        canned.close()
    assert (err.retryable, err.kind) == (True, "bad_response"), err


def test_content_parts_and_usage_are_read():
    canned = _Canned(
        b'{"choices": [{"message": {"content": [{"type": "text", "text": "urgent"}, '
        b'{"type": "text", "text": " now"}]}}], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}'
    )
    try:
        out = call_prompt(make_spec(canned.url), {"text": "x"}, settings=SETTINGS)
    finally:
        canned.close()
    assert (out.decision, out.raw_output, out.prompt_tokens, out.completion_tokens) == ("urgent", "urgent now", 7, 2)


def test_half_a_surrogate_pair_in_an_answer_is_replaced_so_it_can_be_stored():
    """JSON may carry "\\ud800" alone; Python decodes it to a str no UTF-8 codec (nor the
    database) accepts, and the item's write-back failed on it for ever."""
    canned = _Canned(b'{"choices": [{"message": {"content": "urgent \\ud800 \\u00e9"}}]}')
    try:
        out = call_prompt(make_spec(canned.url), {"text": "x"}, settings=SETTINGS)
    finally:
        canned.close()
    assert out.decision == "urgent"
    assert out.raw_output.encode("utf-8") == "urgent \ufffd \u00e9".encode("utf-8")
