"""Junk at the edge of a real `promptgate serve` (issue 33.6): a Host header that two readers
would read as two hosts, and a JSON number too long for Python to read, each refused in one
line of the service's own."""

from __future__ import annotations

import socket

import httpx2
import pytest
from support.service_harness import Service


@pytest.fixture
def served(mysql_url, tmp_path):
    svc = Service(mysql_url, tmp_path)
    yield svc
    svc.stop()


def raw_get(port: int, host_lines: list[str]) -> str:
    """A GET /healthz with these Host lines, as sent on the wire; the status line back."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        head = "".join(f"Host: {h}\r\n" for h in host_lines)
        conn.sendall(f"GET /healthz HTTP/1.1\r\n{head}Connection: close\r\n\r\n".encode("latin-1"))
        answer = b""
        while chunk := conn.recv(4096):
            answer += chunk
    return answer.decode("latin-1").split("\r\n", 1)[0]


def test_a_host_with_userinfo_or_other_junk_is_refused(served):
    """Review: ``Host: localhost:80@evil`` was answered: the check split at the first ':' and
    saw localhost, where a reader parsing it as a URL's authority sees the host evil."""
    with httpx2.Client(base_url=served.url, timeout=30) as anon:
        assert anon.get("/healthz", headers={"Host": f"localhost:{served.port}"}).status_code == 200
        for junk in ("localhost:80@evil", "evil@localhost", "[::1]:80@evil", "localhost:abc", "localhost:99999"):
            refused = anon.get("/healthz", headers={"Host": junk})
            assert refused.status_code == 400, junk
            assert refused.json()["error"] == "the Host header must be one host name or address, with an optional port"
        login = anon.post(
            "/login",
            content=f"token={served.tokens['read']}&next=/",
            headers={"Origin": "http://localhost:80@evil", "Content-Type": "application/x-www-form-urlencoded"},
        )
        assert login.status_code == 403 and "set-cookie" not in login.headers
    assert raw_get(served.port, ["localhost"]).endswith(" 200 OK")
    assert " 400 " in raw_get(served.port, ["localhost", "evil.example"])  # two readers, two hosts
    assert "Traceback" not in served.log()


def test_a_json_number_too_long_to_read_is_refused_in_the_services_own_words(served):
    """Review: a 100,000-digit number in a JSON body answered with Python's own hint
    ("Exceeds the limit (4300 digits) …; use sys.set_int_max_str_digits()")."""
    long_number = "9" * 100_000
    with served.client("admin") as client:
        for path, body in (
            ("/v1/updates", '{"prompt": {"name": "p1", "params": {"max_tokens": ' + long_number + "}}}"),
            ("/v1/tokens", '{"name": "t", "scope": "read", "n": -' + long_number + "}"),
            ("/v1/sync", '{"config": "x", "dry_run": ' + long_number + "}"),
        ):
            response = client.post(path, content=body, headers={"content-type": "application/json"})
            assert response.status_code == 400, (path, response.text[:200])
            error = response.json()["error"]
            assert error == "the JSON body has a number of more than 100 digits", (path, error[:200])
    assert "Traceback" not in served.log()


def test_a_long_number_in_a_yaml_prompt_or_a_jsonl_upload_is_refused_in_one_line(served):
    """The same hint came through a YAML prompt body (\"malformed YAML: ValueError: Exceeds
    the limit …\"), and a JSONL dataset upload with such a number was an internal error."""
    long_number = "9" * 100_000
    prompt = "name: p1\nmodel: m\nparams: {max_tokens: " + long_number + "}\nmessages: [{role: user, content: hi}]\n"
    rows = '{"item_id": "a", "expected_decision": "yes", "n": ' + long_number + "}\n"
    with served.client("admin") as client:
        posted = client.post("/v1/updates", content=prompt, headers={"content-type": "application/yaml"})
        assert posted.status_code == 400
        assert posted.json()["error"] == "prompt: line 3, column 22: a number longer than 100 characters"
        uploaded = client.put("/v1/datasets/d/rows", params={"path": "d.jsonl"}, content=rows.encode())
        assert uploaded.status_code == 400, uploaded.text[:300]
        assert uploaded.json()["error"] == "d.jsonl: line 1: a number longer than 4,300 digits"
    assert "Traceback" not in served.log()
