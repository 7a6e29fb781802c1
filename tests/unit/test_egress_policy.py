"""The service's egress policy (gate/datasets/sources/egress.py, warehouse_net.py) and what the
service takes and shows of a source: no ${VAR} after any decoding, only allowed
addresses after resolution, a sql+ source with host and credentials, no path nor
credential shown."""

from __future__ import annotations

import ipaddress

import pytest

from gate.datasets.sources import SourceOptions, open_source, shown_source
from gate.datasets.sources.egress import Egress
from gate.errors import DatasetError, UsageError
from gate.service.dataset_access import remote_source_problem, scrubbed


@pytest.mark.parametrize(
    "source",
    [
        "sql+postgresql+psycopg://$%7BPROMPTGATE_DATABASE_URL%7D@host:5432/db?query=SELECT+1",
        "sql+mysql+pymysql://u:%24%7BOPENAI_API_KEY%7D@host/db?query=SELECT+1",
        "sql+mysql+pymysql://u:p@%24%7BX%7D/db?query=SELECT+1",
        "sql+mysql+pymysql://u:p@host/%24%7BX%7D?query=SELECT+1",
        "sql+mysql+pymysql://u:p@host/db?query=SELECT+1&application_name=%24%257BX%257D",
        "sql+mysql+pymysql://u:p@host/db?query=SELECT+1&%24%7BX%7D=1",
        "https://h.example/x.csv?t=$%25257BOPENAI_API_KEY%25257D",
        "https://h.example/$%7BHOME%7D/x.csv",
    ],
)
def test_an_encoded_variable_is_refused_in_any_part(source):
    assert "server's environment" in (remote_source_problem(source) or ""), source


def test_endless_encoding_is_refused():
    source = "https://h.example/x.csv?t=%" + "25" * 12 + "41"
    assert "percent-encoded more than" in (remote_source_problem(source) or "")


def test_readers_opened_for_the_service_expand_nothing(monkeypatch):
    monkeypatch.setenv("SECRET_FOR_TEST", "hunter2")
    reader = open_source(
        "https://203.0.113.9/x.csv?t=${SECRET_FOR_TEST}", SourceOptions(expand_env=False, egress=Egress.parse("public"))
    )
    assert "hunter2" not in reader.url and "${SECRET_FOR_TEST}" in reader.url
    from gate.datasets.sources.warehouse import parse_warehouse_uri

    url, _ = parse_warehouse_uri("sql+mysql+pymysql://u:${SECRET_FOR_TEST}@h/db?query=SELECT+1", expand=False)
    assert url.password == "${SECRET_FOR_TEST}"


@pytest.mark.parametrize(
    "address, kind",
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("10.1.2.3", "private"),
        ("192.168.0.1", "private"),
        ("172.16.5.5", "private"),
        ("100.64.0.1", "not a globally routable"),
        ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
        ("2002:7f00:1::1", "loopback"),
        ("64:ff9b::a00:1", "private"),
    ],
)
def test_the_default_refuses_what_is_not_public(address, kind):
    assert kind in (Egress.parse(None).refusal(ipaddress.ip_address(address)) or ""), address


def test_public_addresses_and_listed_ones_are_allowed():
    default = Egress.parse("public")
    assert default.refusal(ipaddress.ip_address("8.8.8.8")) is None
    assert default.refusal(ipaddress.ip_address("2606:4700::1111")) is None
    listed = Egress.parse("127.0.0.2/32, 10.0.0.0/8")
    assert listed.refusal(ipaddress.ip_address("127.0.0.2")) is None
    assert listed.refusal(ipaddress.ip_address("10.9.9.9")) is None
    assert listed.refusal(ipaddress.ip_address("127.0.0.1")) and listed.refusal(ipaddress.ip_address("8.8.8.8"))


def test_a_name_is_checked_after_resolution():
    with pytest.raises(DatasetError, match="refused by the service's source policy: .*loopback"):
        Egress.parse("public").pin("localhost", 80, "http://localhost/x.csv")
    assert Egress.parse("127.0.0.1/32").pin("127.0.0.1", 80, "s") == "127.0.0.1"
    with pytest.raises(DatasetError, match="does not resolve"):
        Egress.parse("public").pin("no-such-host.invalid", 80, "s")


def test_the_servers_own_address_is_refused(monkeypatch):
    """An address of the server itself is told by binding to it (nothing is sent); a global
    address the server holds is refused under the default policy. (It ran once as a skip
    when the machine had no route out: it no longer needs one.)"""
    from gate.datasets.sources import egress

    assert egress.is_own_address(ipaddress.ip_address("127.0.0.1"))
    assert not egress.is_own_address(ipaddress.ip_address("192.0.2.1"))  # TEST-NET-1: nobody's
    held = ipaddress.ip_address("8.8.8.8")  # as if this machine held it
    assert Egress.parse("public").refusal(held) is None
    monkeypatch.setattr(egress, "is_own_address", lambda address: address == held)
    assert Egress.parse("public").refusal(held) == "an address of the server itself"


def test_the_list_is_parsed_or_refused_in_one_line():
    assert Egress.parse("public, data.example.com").names == frozenset({"data.example.com"})
    with pytest.raises(UsageError, match="neither a host name"):
        Egress.parse("not a host!")
    with pytest.raises(UsageError):
        Egress.parse(" , ")


@pytest.mark.parametrize(
    "source, why",
    [
        ("sql+mysql+pymysql://u:p@/db?query=SELECT+1", "must name its host"),
        ("sql+mysql+pymysql://u@203.0.113.9/db?query=SELECT+1", "a user and a password"),
        ("sql+mysql+pymysql://203.0.113.9/db?query=SELECT+1", "a user and a password"),
        ("sql+postgresql+psycopg://u:p@/db?query=SELECT+1&host=/var/run/postgresql", "must name its host"),
        ("sql+mysql+pymysql://u:p@203.0.113.9/db?query=SELECT+1&unix_socket=/tmp/m.sock", "'unix_socket'"),
        ("sql+mssql+pyodbc://u:p@203.0.113.9/db?query=SELECT+1", r"postgresql \(psycopg\), mysql or mariadb"),
        ("sql+mysql+pymysql://u:p@127.0.0.1/db?query=SELECT+1", "loopback"),
        ("sql+mysql+pymysql://u:p@169.254.169.254/db?query=SELECT+1", "link-local"),
    ],
)
def test_a_sql_source_for_a_caller_names_host_and_credentials(source, why):
    with pytest.raises(DatasetError, match=why):
        open_source(source, SourceOptions(expand_env=False, egress=Egress.parse("public")))


def test_sql_connections_are_pinned_and_bounded():
    from sqlalchemy.engine import make_url

    from gate.datasets.sources.warehouse_net import for_service, timeouts

    url, args = for_service(make_url("postgresql+psycopg://u:p@127.0.0.1/db"), Egress.parse("127.0.0.1/32"), "s")
    assert args == {"hostaddr": "127.0.0.1"} and url.host == "127.0.0.1"
    url, args = for_service(make_url("mysql+pymysql://u:p@localhost/db"), Egress.parse("127.0.0.0/8,::1/128"), "s")
    assert url.host in ("127.0.0.1", "::1") and args == {}
    assert timeouts(make_url("mysql+pymysql://u:p@h/db"), 2.5) == {
        "connect_timeout": 3,
        "read_timeout": 3,
        "write_timeout": 3,
    }
    pg = timeouts(make_url("postgresql+psycopg://u:p@h/db"), 30)
    assert pg == {"connect_timeout": 30, "options": "-c statement_timeout=30000"}


@pytest.mark.parametrize(
    "source, shown",
    [
        ("/srv/gate/data/labels.csv", "labels.csv"),
        ("file:///srv/gate/data/labels.jsonl", "labels.jsonl"),
        (
            "https://u:pw@data.example.com:8443/x/labels.csv?token=abc&sig=def#frag",
            "https://data.example.com:8443/x/labels.csv",
        ),
        ("s3://bucket/key/labels.csv", "s3://bucket/key/labels.csv"),
        (
            "sql+postgresql://reader:s3cret@h:5432/db?query=SELECT+1&sslmode=require&password=x",
            "sql+postgresql://reader:***@h:5432/db?query=SELECT+1",
        ),
        ("sql+sqlite:////srv/gate/labels.db?query=SELECT+1", "sql+sqlite:///labels.db?query=SELECT+1"),
    ],
)
def test_a_source_is_shown_without_path_or_credential(source, shown):
    assert shown_source(source) == shown
    assert scrubbed({"source_uri": source}) == {"source_uri": shown}


def test_an_s3_endpoint_outside_the_policy_is_refused(monkeypatch):
    pytest.importorskip("boto3")
    monkeypatch.setenv("PROMPTGATE_S3_ENDPOINT_URL", "http://169.254.169.254:9000")
    with pytest.raises(DatasetError, match="endpoint .*refused by the service's source policy: .*link-local"):
        open_source("s3://bucket/key.csv", SourceOptions(expand_env=False, egress=Egress.parse("public")))
    allowed = open_source("s3://bucket/key.csv", SourceOptions(expand_env=False, egress=Egress.parse("169.254.0.0/16")))
    assert allowed.endpoint == "http://169.254.169.254:9000"


class _Answer:
    """A loopback HTTP server answering every GET with ``who``."""

    def __init__(self, host: str, port: int, who: bytes, tls=None):
        import http.server
        import threading

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the http.server interface
                outer.hosts.append(self.headers["Host"])
                self.send_response(200)
                self.send_header("Content-Length", str(len(who)))
                self.end_headers()
                self.wfile.write(who)

            def log_message(self, *args):
                pass

        self.hosts: list[str] = []
        self.server = http.server.ThreadingHTTPServer((host, port), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_the_checked_address_is_the_one_connected_to(monkeypatch):
    """A name that resolves to an allowed address for the check and to loopback a moment
    later (DNS rebinding) is still read from the checked address."""
    import socket as socket_module

    from gate.datasets.sources.egress import http_opener

    allowed = _Answer("127.0.0.2", 0, b"allowed")
    forbidden = _Answer("127.0.0.1", allowed.port, b"forbidden")
    real, answers = socket_module.getaddrinfo, iter(["127.0.0.2"])

    def rebinding(host, port, *args, **kwargs):
        if host == "rebind.example":
            host = next(answers, "127.0.0.1")
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket_module, "getaddrinfo", rebinding)
    try:
        body = (
            http_opener(Egress.parse("127.0.0.2/32"), "s")
            .open(f"http://rebind.example:{allowed.port}/x", timeout=5)
            .read()
        )
    finally:
        allowed.close()
        forbidden.close()
    assert body == b"allowed" and forbidden.hosts == [] and allowed.hosts == [f"rebind.example:{allowed.port}"]


def test_https_is_pinned_and_still_checks_the_name(tmp_path):
    """TLS to the checked address: SNI, the certificate check and Host use the name."""
    import ssl
    import subprocess

    from gate.datasets.sources.egress import _PinnedHTTPS, http_opener

    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            tmp_path / "k.pem",
            "-out",
            tmp_path / "c.pem",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(tmp_path / "c.pem", tmp_path / "k.pem")
    import socket as socket_module

    first = socket_module.getaddrinfo("localhost", 0, type=socket_module.SOCK_STREAM)[0][4][0]  # where it connects
    server = _Answer(first, 0, b"over tls", tls)
    opener = http_opener(Egress.parse("127.0.0.0/8, ::1/128"), "s")
    for handler in opener.handlers:
        if isinstance(handler, _PinnedHTTPS):
            handler._context = ssl.create_default_context(cafile=str(tmp_path / "c.pem"))
    try:
        assert opener.open(f"https://localhost:{server.port}/x", timeout=5).read() == b"over tls"
        with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
            opener.open(f"https://{first if ':' not in first else f'[{first}]'}:{server.port}/x", timeout=5)
    finally:
        server.close()
    assert server.hosts == [f"localhost:{server.port}"]


def test_a_reader_opened_for_a_caller_reads_no_query_file(tmp_path):
    """Defence in depth behind the service's option check: the warehouse reader itself,
    opened with expansion off (for a caller), refuses ``query_file`` before reading it."""
    from gate.datasets.sources.warehouse import parse_warehouse_uri

    secret = tmp_path / "q.sql"
    secret.write_text("SELECT 'TOPSECRET' AS item_id")
    uri = f"sql+mysql+pymysql://u:p@203.0.113.9/db?query_file={secret}"
    assert parse_warehouse_uri(uri)[1] == "SELECT 'TOPSECRET' AS item_id"  # the operator's CLI: read
    with pytest.raises(DatasetError, match="never query_file") as refused:
        parse_warehouse_uri(uri, expand=False)
    assert "TOPSECRET" not in str(refused.value)


def test_an_s3_source_for_a_caller_needs_a_bucket_the_operator_lists(monkeypatch):
    """Hostile review: an s3:// source is read with the server's own AWS credentials (its
    instance role): any bucket those reach, then previewable by a read token. Through the
    service, only buckets the operator lists."""
    from gate.service.dataset_access import remote_source_problem

    monkeypatch.delenv("PROMPTGATE_SOURCE_S3_BUCKETS", raising=False)
    assert "PROMPTGATE_SOURCE_S3_BUCKETS" in remote_source_problem("s3://private-bucket/labels.csv")
    monkeypatch.setenv("PROMPTGATE_SOURCE_S3_BUCKETS", "labels, other")
    assert remote_source_problem("s3://labels/d.csv") is None
    assert "PROMPTGATE_SOURCE_S3_BUCKETS" in remote_source_problem("s3://private-bucket/labels.csv")
    monkeypatch.setenv("PROMPTGATE_SOURCE_S3_BUCKETS", "*")
    assert remote_source_problem("s3://private-bucket/labels.csv") is None
