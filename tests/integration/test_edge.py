"""The HTTP edge of a real `promptgate serve`: ids outside their columns, slow clients,
long-polls per token, /docs, the Host header, JSON and form bodies over their limits."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import threading
import time

import httpx2
import pytest
from support.helpers import rules_spec, write_rule_rows
from support.mariadb_server import create_database
from support.migrated import migrated
from support.service_harness import Service

from gate.domain import Gate

BIG = 2**63  # one past BIGINT


def queued_update(db_url: str, tmp_path) -> int:
    gate = Gate.connect(migrated(db_url), upgrade=True)
    try:
        gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 6)))
        gate.map_dataset("p1", "d1", "0.5")
        return gate.submit(rules_spec("p1"), "check")
    finally:
        gate.close()


def serve_with_update(db_url: str, tmp_path):
    update_id = queued_update(db_url, tmp_path)
    svc = Service(db_url, tmp_path)
    svc.update_id = update_id
    return svc


@pytest.fixture
def on_each_dialect(db_url, tmp_path):
    svc = serve_with_update(db_url, tmp_path)
    yield svc
    svc.stop()


@pytest.fixture(scope="module")
def served(mysql_server, tmp_path_factory):
    """One service for the module's tests that leave nothing behind that another reads (a
    refused request, a login, slots given back, a token of its own name): a database, its
    migrated copy and a `promptgate serve` took ~1 s of wall each time."""
    url = create_database(mysql_server[0], f"pg_test_edge_{os.getpid()}_{time.monotonic_ns()}")
    svc = serve_with_update(url, tmp_path_factory.mktemp("edge"))
    yield svc
    svc.stop()


def test_ids_past_their_columns_are_404_on_every_dialect(on_each_dialect):
    served = on_each_dialect
    with served.client("admin") as client:
        for method, path, params in [
            ("GET", f"/v1/updates/{BIG}", {}),
            ("GET", f"/v1/updates/{2**70}", {}),
            ("GET", "/v1/updates/-1", {}),
            ("GET", "/v1/updates/0", {}),
            ("GET", f"/v1/updates/{BIG}/wait", {"timeout": 1}),
            ("POST", f"/v1/updates/{BIG}/cancel", {}),
            ("GET", f"/v1/datasets/d1/versions/{BIG}", {}),
            ("GET", "/v1/datasets/d1/preview", {"version": BIG}),
            ("GET", "/v1/datasets/d1/diff", {"old": BIG, "new": 1}),
            ("GET", f"/updates/{BIG}", {}),
        ]:
            response = client.request(method, path, params=params)
            assert response.status_code == 404, (method, path, params, response.status_code, response.text)
        rolled = client.post("/v1/prompts/p1/rollback", json={"reason": "r", "to": 2**31})
        assert rolled.status_code == 404, rolled.text
    assert "Traceback" not in served.log()


def test_a_waiter_wakes_promptly_while_a_bad_one_is_tried(on_each_dialect):
    served = on_each_dialect
    woke: dict = {}

    def wait_good():
        with served.client("submit") as client:
            started = time.monotonic()
            woke["response"] = client.get(f"/v1/updates/{served.update_id}/wait", params={"timeout": 60})
            woke["at"] = time.monotonic()
            woke["took"] = woke["at"] - started

    waiter = threading.Thread(target=wait_good)
    waiter.start()
    time.sleep(1.0)  # the good waiter is registered with the watcher
    with served.client("submit") as client:
        bad = client.get(f"/v1/updates/{BIG}/wait", params={"timeout": 3})
        assert bad.status_code == 404, bad.text
        time.sleep(0.5)  # a few beats of the watcher with both waits known
    with served.client("admin") as admin:  # the update is not the submit token's (ownership): admin cancels
        cancelled_at = time.monotonic()
        assert admin.post(f"/v1/updates/{served.update_id}/cancel").status_code == 200
    waiter.join(70)
    assert woke["response"].status_code == 200 and woke["response"].json()["status"] == "CANCELLED"
    assert woke["at"] - cancelled_at < 3.0, f"woke {woke['at'] - cancelled_at:.1f} s after the cancel"


def test_the_header_deadline_is_ten_seconds_unless_told():
    from gate.cli.service import serve
    from gate.service.protocol import HEADER_TIMEOUT_SECONDS

    option = next(p for p in serve.params if p.name == "header_timeout")
    assert option.default == HEADER_TIMEOUT_SECONDS == 10.0


def test_a_connection_whose_headers_never_finish_is_closed(mysql_url, tmp_path):
    svc = Service(mysql_url, tmp_path, "--header-timeout", "2")  # (the default, 10 s: the test above)
    try:
        started = time.monotonic()  # before the connection: the server's clock starts at its accept
        with socket.create_connection(("127.0.0.1", svc.port)) as raw:
            raw.settimeout(20)
            raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            for _ in range(3):  # a header line now and then, never the end
                time.sleep(0.5)
                raw.sendall(b"X-Slow: 1\r\n")
            try:
                closed = raw.recv(1024) == b""
            except ConnectionResetError:
                closed = True
            took = time.monotonic() - started
        assert closed and 2 <= took < 5, f"closed={closed} after {took:.1f} s"
        with svc.client(None) as client:  # the server itself answers on
            assert client.get("/healthz").status_code == 200
    finally:
        svc.stop()


def test_a_body_that_stalls_is_ended_with_408(mysql_url, tmp_path):
    svc = Service(mysql_url, tmp_path, "--body-timeout", "1.5")
    try:
        with socket.create_connection(("127.0.0.1", svc.port)) as raw:
            raw.settimeout(10)
            started = time.monotonic()
            raw.sendall(
                b"POST /v1/tokens HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b'Content-Length: 100\r\n\r\n{"name":'
            )
            answer = raw.recv(4096)
            took = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 408") and 1.0 < took < 6, (answer[:200], took)
    finally:
        svc.stop()


async def waiters_reach(client, n: int, token: str, timeout: float = 30) -> None:
    """The service's own count of open long-polls (/metrics) reaches ``n``: each holds its slot."""
    deadline = time.monotonic() + timeout
    while True:
        metrics = (await client.get("/metrics", headers={"Authorization": f"Bearer {token}"})).text
        found = re.search(r"^promptgate_longpoll_waiters ([0-9.e+]+)$", metrics, re.M)
        if found and float(found.group(1)) >= n:
            return
        assert time.monotonic() < deadline, f"open long-polls: {found and found.group(1)}, not {n}"
        await asyncio.sleep(0.1)


def test_long_polls_per_token_are_capped_with_429(served):
    async def run():
        headers = {"Authorization": f"Bearer {served.tokens['submit']}"}
        limits = httpx2.Limits(max_connections=200)
        async with httpx2.AsyncClient(base_url=served.url, headers=headers, timeout=30, limits=limits) as client:
            path = f"/v1/updates/{served.update_id}/wait"
            held = [asyncio.create_task(client.get(path, params={"timeout": 10})) for _ in range(100)]
            await waiters_reach(client, 100, served.tokens["admin"])  # all 100 are waiting (not a fixed 3 s)
            over = await client.get(path, params={"timeout": 1})
            other = await client.get(
                path, params={"timeout": 0}, headers={"Authorization": f"Bearer {served.tokens['admin']}"}
            )
            done = await asyncio.gather(*held)
            again = await client.get(path, params={"timeout": 0})
            return over, other, done, again

    over, other, done, again = asyncio.run(run())
    assert over.status_code == 429 and over.headers.get("retry-after", "").isdigit(), over.text
    assert "open waits" in over.json()["error"]
    assert other.status_code == 200, "another token has its own slots"
    assert [r.status_code for r in done] == [200] * 100
    assert again.status_code == 200, "slots are given back"


def test_docs_are_off_by_default_and_load_no_external_script(mysql_url, tmp_path):
    svc = Service(mysql_url, tmp_path)
    try:
        with svc.client(None) as client:
            assert client.get("/docs").status_code == 404
            assert client.get("/openapi.json").status_code == 200
    finally:
        svc.stop()
    svc = Service(mysql_url, tmp_path, "--docs")
    try:
        with svc.client(None) as client:
            page = client.get("/docs")
            assert page.status_code == 200
            csp = page.headers["content-security-policy"]
            assert (
                "script-src 'self'" in csp
                and "http" not in csp
                and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
            )
            scripts = re.findall(r"<script[^>]*>", page.text)
            assert scripts and all(re.search(r'src="/docs/', tag) for tag in scripts), scripts
            assert "<script>" not in page.text and "//" not in "".join(re.findall(r'(?:src|href)="([^"]*)"', page.text))
            for src in re.findall(r'(?:src|href)="([^"]*)"', page.text):
                asset = client.get(src)
                assert asset.status_code == 200 and len(asset.content) > 20, src
            assert client.get("/docs/assets/..%2f__init__.py").status_code == 404
    finally:
        svc.stop()


def test_a_wrong_host_is_refused_and_login_checks_origin_against_the_allowed_hosts(served):
    with served.client("admin") as client:
        assert client.get("/v1/updates").status_code == 200
        evil = client.get("/v1/updates", headers={"Host": "rebound.example"})
        assert evil.status_code == 400 and "Host" in evil.json()["error"]
        assert client.get("/", headers={"Host": f"rebound.example:{served.port}"}).status_code == 400
    forged = f"rebound.example:{served.port}"
    with httpx2.Client(base_url=served.url, timeout=30) as anon:
        login = anon.post(
            "/login",
            content=f"token={served.tokens['read']}&next=/",
            headers={"Host": forged, "Origin": f"http://{forged}", "Content-Type": "application/x-www-form-urlencoded"},
        )
        assert login.status_code in (400, 403) and "set-cookie" not in login.headers, login.status_code
        cross = anon.post(
            "/login",
            content=f"token={served.tokens['read']}&next=/",
            headers={"Origin": "http://rebound.example", "Content-Type": "application/x-www-form-urlencoded"},
        )
        assert cross.status_code == 403 and "set-cookie" not in cross.headers
        own = anon.post(
            "/login",
            content=f"token={served.tokens['read']}&next=/",
            headers={"Origin": served.url, "Content-Type": "application/x-www-form-urlencoded"},
        )
        assert own.status_code == 303 and "promptgate_session=pgs_" in own.headers.get("set-cookie", "")


def test_an_allowed_host_is_answered(mysql_url, tmp_path):
    svc = Service(
        mysql_url, tmp_path, "--allowed-host", "gate.example.com", env={"PROMPTGATE_ALLOWED_HOSTS": "other.example.com"}
    )
    try:
        with svc.client("read") as client:
            for host in ("gate.example.com", "other.example.com", f"gate.example.com:{svc.port}", "127.0.0.1"):
                assert client.get("/v1/updates", headers={"Host": host}).status_code == 200, host
            assert client.get("/v1/updates", headers={"Host": "gate.example.org"}).status_code == 400
    finally:
        svc.stop()


def test_json_bodies_meet_the_yaml_limits(served):
    deep = "[" * 500 + "]" * 500
    with served.client("admin") as client:
        for body, why in [
            ('{"name": "a", "name": "b", "scope": "read"}', "twice"),
            ('{"prompt": {"name": "p1", "name": "p2"}}', "twice"),
            ('{"prompt": ' + deep + "}", "deeper than 32"),
            ('{"name": "t", "scope": "read", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "deeper than 32"),
        ]:
            for path in ("/v1/tokens", "/v1/updates", "/v1/sync"):
                response = client.post(path, content=body, headers={"content-type": "application/json"})
                assert response.status_code == 400, (path, why, response.status_code, response.text[:200])
                error = response.json()["error"]
                assert why in error and "\n" not in error, error
        nested_ok = {"name": "nested-ok", "scope": "read", "x": json.loads("[" * 20 + "]" * 20)}
        assert client.post("/v1/tokens", json=nested_ok).status_code == 201
    assert "Traceback" not in served.log()


def test_login_with_too_many_fields_is_a_400(served):
    with httpx2.Client(base_url=served.url, timeout=30) as anon:
        form = "&".join(f"f{i}=x" for i in range(20))
        response = anon.post("/login", content=form, headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert response.status_code == 400 and "set-cookie" not in response.headers
    assert "Traceback" not in served.log()
