"""A source fetch has a total deadline, and a body without validators is fetched once (issue
48, finding 8), end to end: `promptgate serve` on MariaDB reading a real HTTP server.

The review: a server sending a 140-byte CSV one byte every 0.12 s held `dataset add` for 34 s
with ``PROMPTGATE_SOURCE_TIMEOUT=2`` (a per-read timeout: every byte came in time), and the
body was fetched twice when the server sent no ETag nor Last-Modified (once to hash it for
its version, once for its rows). Here ``PROMPTGATE_SOURCE_DEADLINE=1``: a trickle of the body,
or of the headers, ends in one line naming the deadline within a few seconds."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from support.service_harness import Service

CSV = b"item_id,expected_decision,text\n" + b"".join(b"i%d,yes,alpha %d\n" % (i, i) for i in range(8))


class Trickle(BaseHTTPRequestHandler):
    """/slow.csv: the body one byte every 0.1 s; /slow-headers.csv: the headers so; /plain.csv:
    at once, with no ETag nor Last-Modified. Every GET is counted by path."""

    hits: list[str] = []
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802 - the http.server interface
        Trickle.hits.append(self.path)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(
            CSV
        )
        try:
            if self.path.startswith("/slow-headers"):
                self._trickle(head + CSV)
            elif self.path.startswith("/slow"):
                self.wfile.write(head)
                self._trickle(CSV)
            else:
                self.wfile.write(head + CSV)
        except OSError:
            pass  # the reader gave up: what the test wants

    def _trickle(self, data: bytes) -> None:
        for i in range(len(data)):
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()
            time.sleep(0.1)

    def log_message(self, *args):
        pass


@pytest.fixture
def trickle():
    server = ThreadingHTTPServer(("127.0.0.2", 0), Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Trickle.hits = []
    yield f"http://127.0.0.2:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_trickling_server_meets_the_total_deadline_and_a_plain_body_is_fetched_once(mysql_url, tmp_path, trickle):
    assert len(CSV) > 140  # 14 s and more at 0.1 s a byte
    env = {"PROMPTGATE_SOURCE_HOSTS": "127.0.0.2/32", "PROMPTGATE_SOURCE_TIMEOUT": "2"}
    env["PROMPTGATE_SOURCE_DEADLINE"] = "1"
    svc = Service(mysql_url, tmp_path, env=env)
    try:
        with svc.client("admin") as admin:
            for n, path in enumerate(("/slow.csv", "/slow-headers.csv")):
                started = time.monotonic()
                answer = admin.post("/v1/datasets", json={"name": f"slow{n}", "source": f"{trickle}{path}"})
                took = time.monotonic() - started
                assert 400 <= answer.status_code < 500, (path, answer.status_code, answer.text[:300])
                error = answer.json()["error"]
                assert "PROMPTGATE_SOURCE_DEADLINE" in error and "\n" not in error, (path, error)
                assert took < 4, (path, took)  # the deadline (1 s), and a retry's at most
            taken = admin.post("/v1/datasets", json={"name": "plain", "source": f"{trickle}/plain.csv"})
            assert taken.status_code == 200 and taken.json()["version"]["row_count"] == 8, taken.text
            assert taken.json()["version"]["source_version"].startswith("sha256:"), taken.text
    finally:
        svc.stop()
    assert Trickle.hits.count("/plain.csv") == 1, Trickle.hits  # hashed and read from one fetch
