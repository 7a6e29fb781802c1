"""The service edge's pure parts: the strict JSON loader (the YAML limits for JSON bodies)
and the Host names the service answers for."""

from __future__ import annotations

import json

import pytest

from gate.prompt.yaml_file import MAX_DEPTH
from gate.service.body_limits import JsonRefused, json_problem, strict_json
from gate.service.edge import default_hosts, host_name, origin_allowed, parse_hosts


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_json_as_deep_as_a_yaml_file_may_be_is_read_and_one_level_more_is_refused():
    assert strict_json(nested(MAX_DEPTH)) is not None
    with pytest.raises(JsonRefused, match="deeper than 32"):
        strict_json(nested(MAX_DEPTH + 1))
    with pytest.raises(JsonRefused, match="deeper than 32"):
        strict_json('{"a": ' + nested(200_000) + "}")  # past the parser's own recursion


@pytest.mark.parametrize("text", ['{"a": 1, "a": 2}', '{"x": [{"k": 1, "k": 1}]}', '[{"p": {"q": 1, "q": 2}}]'])
def test_a_key_twice_anywhere_is_refused_naming_it(text):
    with pytest.raises(JsonRefused, match="twice"):
        strict_json(text)
    assert "twice" in json_problem(text.encode())


def test_what_is_not_json_is_left_to_the_route():
    assert json_problem(b"name: p1\n") is None and json_problem(b"\xff\xfe") is None
    with pytest.raises(ValueError):
        strict_json("{")
    assert strict_json('{"a": {"b": [1, 2]}}') == json.loads('{"a": {"b": [1, 2]}}')


@pytest.mark.parametrize(
    "header, name",
    [
        ("gate.example.com", "gate.example.com"),
        ("Gate.Example.com:8080", "gate.example.com"),
        ("[::1]:8080", "::1"),
        ("::1", "::1"),
        ("127.0.0.1:80", "127.0.0.1"),
        ("", ""),
    ],
)
def test_host_names(header, name):
    assert host_name(header) == name


def test_default_hosts_are_loopback_and_a_specific_bound_address():
    assert set(default_hosts("127.0.0.1")) == {"localhost", "127.0.0.1", "::1"}
    assert set(default_hosts("0.0.0.0")) == {"localhost", "127.0.0.1", "::1"}
    assert set(default_hosts("::")) == {"localhost", "127.0.0.1", "::1"}
    assert "10.1.2.3" in default_hosts("10.1.2.3")
    assert parse_hosts(["a.example, b.example", "c.example:443"])[:3] == ("a.example", "b.example", "c.example")
    assert "127.0.0.1" in parse_hosts(["a.example"]) and parse_hosts(["", " "]) == ()


def test_an_origin_must_name_an_allowed_host():
    allowed = ("gate.example.com", "127.0.0.1")
    assert origin_allowed("https://gate.example.com", allowed)
    assert origin_allowed("http://127.0.0.1:8080", allowed)
    assert not origin_allowed("https://gate.example.com.evil.example", allowed)
    assert not origin_allowed("null", allowed) and not origin_allowed("file://gate.example.com", allowed)


def test_a_json_body_is_checked_off_the_event_loop(monkeypatch):
    """Hostile review: the body check runs before any token is checked, and 1 MB of ``{}``
    objects costs it 0.6 s of CPU: run on the event loop, each such request from anyone
    stopped the service answering anything else for that long."""
    import asyncio
    import threading

    from gate.service import body_limits

    checked_on = []

    def recording(body):
        checked_on.append(threading.get_ident())
        return None

    monkeypatch.setattr(body_limits, "json_problem", recording)

    async def app(scope, receive, send):
        await receive()

    async def scenario():
        sent = [{"type": "http.request", "body": b'{"a": 1}', "more_body": False}]

        async def receive():
            return sent.pop(0)

        async def send(message):
            pass

        scope = {
            "type": "http",
            "method": "POST",
            "path": "/v1/updates",
            "headers": [(b"content-type", b"application/json")],
        }
        await body_limits.BodyLimit(app)(scope, receive, send)
        return threading.get_ident()

    loop_thread = asyncio.run(scenario())
    assert len(checked_on) == 1 and checked_on[0] != loop_thread
