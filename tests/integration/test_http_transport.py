"""The CLI's HTTP transport (``gate.client.transport``) against real local servers: a plain
HTTP server, an HTTPS one with a certificate made for the test, and a forwarding proxy
that speaks both absolute-URL requests and CONNECT tunnels. What it must do: reuse a
connection for reads only, send a read again once when the server closed it while idle,
go through the proxy the environment names (and around it for no_proxy hosts), verify TLS
against the CA store the environment names, and fail in one line within its timeouts."""

from __future__ import annotations

import base64
import json
import select
import socket
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gate.client.transport import Timeouts, Transport, TransportError

PROXY_VARS = (
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
)


class Echo(BaseHTTPRequestHandler):
    """Answers every request with what it received, as JSON; counts connections."""

    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.server.connections += 1

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        data = json.dumps(
            {
                "method": self.command,
                "path": self.path,
                "body": body.decode(errors="replace"),
                "headers": dict(self.headers),
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = _answer

    def log_message(self, *args):
        pass


def serve(handler, context: ssl.SSLContext | None = None) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.connections = 0
    server.daemon_threads = True
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Proxy(BaseHTTPRequestHandler):
    """A forwarding proxy: absolute-URL requests are sent on, CONNECT opens a tunnel. It
    records each request line and its Proxy-Authorization."""

    protocol_version = "HTTP/1.1"

    def do_CONNECT(self):
        self.server.seen.append((self.command, self.path, self.headers.get("Proxy-Authorization")))
        host, port = self.path.rsplit(":", 1)
        upstream = socket.create_connection((host, int(port)))
        self.send_response(200, "Connection established")
        self.end_headers()
        sockets = [self.connection, upstream]
        while True:
            ready, _, _ = select.select(sockets, [], [], 5)
            if not ready:
                break
            for s in ready:
                data = s.recv(65536)
                if not data:
                    upstream.close()
                    return
                (upstream if s is self.connection else self.connection).sendall(data)

    def _forward(self):
        import http.client
        from urllib.parse import urlsplit

        self.server.seen.append((self.command, self.path, self.headers.get("Proxy-Authorization")))
        target = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        conn = http.client.HTTPConnection(target.hostname, target.port)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "proxy-authorization"}
        conn.request(
            self.command, target.path + (f"?{target.query}" if target.query else ""), body=body, headers=headers
        )
        answer = conn.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = _forward

    def log_message(self, *args):
        pass


@pytest.fixture
def no_proxy_env(monkeypatch):
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def echo(no_proxy_env):
    server = serve(Echo)
    yield server
    server.shutdown()


@pytest.fixture
def proxy():
    server = serve(Proxy)
    server.seen = []
    yield server
    server.shutdown()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (openssl), and its key."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


@pytest.fixture
def tls_echo(certificate, no_proxy_env):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*map(str, certificate))
    server = serve(Echo, context)
    yield server
    server.shutdown()


def url(server, scheme="http") -> str:
    return f"{scheme}://127.0.0.1:{server.server_address[1]}"


def test_reads_reuse_a_connection_and_changes_go_on_a_fresh_one(echo):
    t = Transport(url(echo) + "/base", {"Authorization": "Bearer x"})
    first = json.loads(t.request("GET", "/v1/a", params={"q": "1 2", "n": 3}).content)
    assert first["path"] == "/base/v1/a?q=1+2&n=3" and first["headers"]["Authorization"] == "Bearer x"
    t.request("GET", "/v1/b")
    assert echo.connections == 1  # the second read reused the first's connection
    posted = json.loads(
        t.request("POST", "/v1/c", content=b'{"k": 1}', headers={"Content-Type": "application/json"}).content
    )
    assert posted["body"] == '{"k": 1}' and echo.connections == 2
    t.request("PUT", "/v1/d")
    assert echo.connections == 3
    t.close()


def test_a_read_on_a_connection_the_server_closed_while_idle_is_sent_again_once(echo):
    t = Transport(url(echo), {})
    t.request("GET", "/one")
    t._kept.sock.shutdown(socket.SHUT_RDWR)  # as a server's idle timeout would leave it
    assert json.loads(t.request("GET", "/two").content)["path"] == "/two"
    assert echo.connections == 2


def test_an_upload_streams_a_file_with_its_length(echo, tmp_path):
    data = tmp_path / "rows.csv"
    data.write_bytes(b"id,label\n" + b"x,y\n" * 50_000)
    with data.open("rb") as fh:
        answer = Transport(url(echo), {}).request(
            "PUT", "/rows", content=fh, headers={"Content-Length": str(data.stat().st_size)}
        )
    assert json.loads(answer.content)["body"] == data.read_text()


def test_the_proxy_of_the_environment_is_used_and_no_proxy_goes_around_it(echo, proxy, no_proxy_env):
    no_proxy_env.setenv("http_proxy", f"http://user:p%40ss@127.0.0.1:{proxy.server_address[1]}")
    answer = json.loads(Transport(url(echo), {}).request("GET", "/via", params={"a": "b"}).content)
    assert answer["path"] == "/via?a=b"
    auth = "Basic " + base64.b64encode(b"user:p@ss").decode()
    assert proxy.seen == [("GET", f"{url(echo)}/via?a=b", auth)]
    no_proxy_env.setenv("no_proxy", "localhost,127.0.0.1")
    Transport(url(echo), {}).request("GET", "/direct")
    assert len(proxy.seen) == 1


def test_https_is_verified_against_the_ca_store_the_environment_names(tls_echo, certificate, no_proxy_env):
    with pytest.raises(TransportError) as refused:
        Transport(url(tls_echo, "https"), {}).request("GET", "/x")
    assert "certificate" in str(refused.value) and "\n" not in str(refused.value)
    no_proxy_env.setenv("SSL_CERT_FILE", str(certificate[0]))
    assert json.loads(Transport(url(tls_echo, "https"), {}).request("GET", "/x").content)["path"] == "/x"


def test_https_through_a_proxy_is_a_connect_tunnel(tls_echo, certificate, proxy, no_proxy_env):
    no_proxy_env.setenv("SSL_CERT_FILE", str(certificate[0]))
    no_proxy_env.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
    answer = json.loads(Transport(url(tls_echo, "https"), {}).request("GET", "/tunnelled").content)
    assert answer["path"] == "/tunnelled"
    assert proxy.seen == [("CONNECT", f"127.0.0.1:{tls_echo.server_address[1]}", None)]


def test_a_silent_server_is_one_line_within_the_read_timeout(no_proxy_env):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # accepts, never answers
    try:
        t = Transport(f"http://127.0.0.1:{listener.getsockname()[1]}", {}, Timeouts(connect=2, read=0.5))
        began = time.monotonic()
        with pytest.raises(TransportError) as silent:
            t.request("GET", "/never")
        assert str(silent.value) == "timed out" and time.monotonic() - began < 3
    finally:
        listener.close()
