"""What a token holder can make `promptgate serve` reach through a dataset source: nothing of
the server's environment (``${VAR}``, percent-encoded or not), none of its network beyond
the operator's ``--source-hosts`` (after resolution, behind redirects), no sql+ source
without host and credentials, no connection held for minutes; and what a read token sees
of a source: no path of the server's, no credential. Real sockets count every connection."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from support.helpers import rules_spec, write_rule_rows
from support.migrated import migrated
from support.service_harness import Service

from gate.domain import Gate

CSV = b"item_id,expected_decision,text\ni1,yes,alpha\ni2,no,beta\n"
POLICY = "the service's source policy"


class Listener:
    """A TCP listener that counts connections; ``hang``: keeps them open and never answers,
    else closes them at once."""

    def __init__(self, host: str = "127.0.0.1", hang: bool = False):
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.port, self.hang, self.count, self.held = self.sock.getsockname()[1], hang, 0, []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.count += 1
            if self.hang:
                self.held.append(conn)
            else:
                conn.close()

    def close(self):
        self.sock.close()
        for conn in self.held:
            conn.close()


class Site(BaseHTTPRequestHandler):
    """/ok.csv: a dataset; /away.csv: a redirect to ``target``."""

    target = ""
    hits: list[str] = []

    def do_GET(self):  # noqa: N802 - the http.server interface
        Site.hits.append(self.path)
        if self.path.startswith("/away"):
            self.send_response(302)
            self.send_header("Location", Site.target)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/csv")
        self.send_header("Content-Length", str(len(CSV)))
        self.end_headers()
        self.wfile.write(CSV)

    def log_message(self, *args):
        pass


@pytest.fixture
def listener():
    found = Listener()
    yield found
    found.close()


@pytest.fixture
def site():
    """The dataset server on 127.0.0.2 (the address the tests' policy allows)."""
    server = ThreadingHTTPServer(("127.0.0.2", 0), Site)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Site.hits = []
    yield f"http://127.0.0.2:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def serve(mysql_url, tmp_path, hosts: str):
    """The service with a policy (through the environment variable) and a 2 s source timeout."""
    return Service(mysql_url, tmp_path, env={"PROMPTGATE_SOURCE_HOSTS": hosts, "PROMPTGATE_SOURCE_TIMEOUT": "2"})


def refused(admin, source: str, name: str = "exfil") -> str:
    """POST /v1/datasets and /v1/sync with ``source``: both refused; the sync's error."""
    response = admin.post("/v1/datasets", json={"name": name, "source": source})
    assert 400 <= response.status_code < 500, (source, response.text)
    config = f"datasets: {{{name}: {{source: '{source}'}}}}\nprompts: {{}}\n"
    synced = admin.post("/v1/sync", json={"config": config})
    assert 400 <= synced.status_code < 500, (source, synced.text)
    return response.json()["error"]


def test_an_encoded_variable_is_refused_and_nothing_is_sent(mysql_url, tmp_path, listener):
    """The issue's source: percent-encoded ${VAR} was decoded, filled in with the server's
    database URL and sent to the caller's host. The listener's address is allowed, so only
    the refusal of the variable stands between the server's secret and the listener."""
    svc = serve(mysql_url, tmp_path, "127.0.0.1/32")
    port = listener.port
    try:
        with svc.client("admin") as admin:
            for source in (
                f"sql+mysql+pymysql://$%7BPROMPTGATE_DATABASE_URL%7D:p@127.0.0.1:{port}/db?query=SELECT+1",
                f"sql+postgresql+psycopg://$%7BPROMPTGATE_DATABASE_URL%7D@127.0.0.1:{port}/db?query=SELECT+1",
                f"sql+mysql+pymysql://u:%2524%257BPROMPTGATE_DATABASE_URL%257D@127.0.0.1:{port}/db?query=SELECT+1",
                f"http://127.0.0.1:{port}/d.csv?k=$%7BPROMPTGATE_DATABASE_URL%7D",
            ):
                error = refused(admin, source)
                assert "server's environment" in error and mysql_url not in error, (source, error)
    finally:
        svc.stop()
    time.sleep(0.2)
    assert listener.count == 0, "the server connected to the caller's listener"


def test_a_refresh_through_the_service_does_not_fill_in_a_variable(mysql_url, tmp_path, site, monkeypatch):
    """A dataset the operator registered with ${VAR} on the CLI is not refreshed by the
    service: the server's environment would fill it in."""
    monkeypatch.setenv("LABELS_TOKEN", "operator-token")
    gate = Gate.connect(migrated(mysql_url), upgrade=True)
    gate.register_dataset("tokened", f"{site}/ok.csv?t=${{LABELS_TOKEN}}")
    gate.close()
    hits = len(Site.hits)
    svc = serve(mysql_url, tmp_path, "127.0.0.2/32")
    try:
        with svc.client("admin") as admin:
            response = admin.post("/v1/datasets/tokened/refresh")
    finally:
        svc.stop()
    assert response.status_code == 400 and "server's environment" in response.json()["error"], response.text
    assert len(Site.hits) == hits


def test_addresses_outside_the_policy_are_refused_before_connecting(mysql_url, tmp_path, listener, site):
    """Loopback, the metadata address, a private address and a name resolving to loopback,
    directly or behind a redirect from an allowed server; an allowed server still works."""
    closed = Listener()
    closed_port = closed.port
    closed.close()
    Site.target = f"http://127.0.0.1:{listener.port}/d.csv"
    svc = serve(mysql_url, tmp_path, "127.0.0.2/32")
    try:
        with svc.client("admin") as admin:
            taken = admin.post("/v1/datasets", json={"name": "allowed", "source": f"{site}/ok.csv"})
            assert taken.status_code == 200 and taken.json()["version"]["row_count"] == 2, taken.text
            for source in (
                f"http://127.0.0.1:{listener.port}/d.csv",
                "http://169.254.169.254/latest/meta-data/x.csv",
                "http://10.11.12.13/x.csv",
                f"http://localhost:{listener.port}/d.csv",
                f"{site}/away.csv",
                f"sql+mysql+pymysql://u:p@127.0.0.1:{listener.port}/db?query=SELECT+1",
                "sql+mysql+pymysql://u:p@169.254.169.254/db?query=SELECT+1",
            ):
                error = refused(admin, source)
                assert POLICY in error and "\n" not in error, (source, error)
            assert "/away.csv" in Site.hits  # the redirect was asked for, its target refused
            open_error = refused(admin, f"http://127.0.0.1:{listener.port}/d.csv")
            closed_error = refused(admin, f"http://127.0.0.1:{closed_port}/d.csv")
            assert open_error.replace(str(listener.port), "P") == closed_error.replace(str(closed_port), "P")
    finally:
        svc.stop()
    assert listener.count == 0, "the server connected to a refused address"


def test_the_default_policy_refuses_loopback(service, listener):
    with service.client("admin") as admin:
        error = refused(admin, f"http://127.0.0.1:{listener.port}/d.csv")
    assert POLICY in error and "loopback" in error
    assert listener.count == 0


def test_the_default_policy_refuses_iana_special_purpose_blocks_whatever_python_says(mysql_url, tmp_path):
    """Issue 48, finding 7: ``public`` relied on ``ipaddress.is_global``, which before Python
    3.11.10 / 3.12.4 calls 192.0.0.192 (a cloud's metadata address) and 192.0.0.8 global; and
    blocks IANA marks globally reachable (AS112, AMT, PCP and TURN anycast) are no dataset's
    home either. Each is refused before any connection, by the service's default policy."""
    svc = serve(mysql_url, tmp_path, "public")
    try:
        with svc.client("admin") as admin:
            for address in ("192.0.0.192", "192.0.0.8", "192.0.0.9", "192.0.0.10", "192.31.196.1", "192.52.193.1"):
                for source in (f"http://{address}/x.csv", f"sql+mysql+pymysql://u:p@{address}/db?query=SELECT+1"):
                    error = refused(admin, source)
                    assert POLICY in error and "special-purpose" in error and "\n" not in error, (source, error)
    finally:
        svc.stop()


def test_a_query_file_hidden_behind_a_fragment_reads_no_file_of_the_servers(mysql_url, tmp_path, listener):
    """Hostile review: the option check split the URI at '#' (urlsplit), SQLAlchemy's parser
    did not, and the reader read ``query_file`` before any check: a file of the server's
    came back in the error ("not 'TOPSECRETVALUE123'") or went to the caller's database
    as the query. Refused now, and a reader opened for a caller reads no query file."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRETVALUE123 and more\n")
    svc = serve(mysql_url, tmp_path, "127.0.0.1/32")
    try:
        with svc.client("admin") as admin:
            for source in (
                f"sql+mysql+pymysql://u:p@127.0.0.1:{listener.port}/db?query=SELECT+1#&query_file={secret}",
                f"sql+mysql+pymysql://u:p@127.0.0.1:{listener.port}/db?query=SELECT+1#x&query_file={secret}",
                f"sql+mysql+pymysql://u:p@127.0.0.1:{listener.port}/db#?query_file={secret}",
            ):
                error = refused(admin, source)
                assert "TOPSECRET" not in error and ("'#'" in error or "query_file" in error), (source, error)
    finally:
        svc.stop()
    assert listener.count == 0


def test_a_sql_source_needs_host_and_credentials(mysql_url, tmp_path, listener):
    svc = serve(mysql_url, tmp_path, "127.0.0.1/32")
    try:
        with svc.client("admin") as admin:
            no_password = refused(admin, f"sql+mysql+pymysql://u@127.0.0.1:{listener.port}/db?query=SELECT+1")
            no_host = refused(admin, "sql+mysql+pymysql://u:p@/db?query=SELECT+1")
    finally:
        svc.stop()
    assert "must name a user and a password" in no_password, no_password
    assert "must name its host" in no_host, no_host
    assert listener.count == 0


@pytest.mark.parametrize("scheme", ["sql", "http"])
def test_a_listener_that_never_answers_holds_no_thread(mysql_url, tmp_path, scheme):
    """Accepts, never answers: the request ends within a bounded time (source timeout 2 s)."""
    hanging = Listener(hang=True)
    svc = serve(mysql_url, tmp_path, "127.0.0.1/32")
    source = (
        f"sql+mysql+pymysql://u:p@127.0.0.1:{hanging.port}/db?query=SELECT+1"
        if scheme == "sql"
        else f"http://127.0.0.1:{hanging.port}/d.csv"
    )
    try:
        with svc.client("admin", timeout=40) as admin:
            started = time.monotonic()
            response = admin.post("/v1/datasets", json={"name": "slow", "source": source})
            elapsed = time.monotonic() - started
    finally:
        svc.stop()
        hanging.close()
    assert hanging.count >= 1  # it did connect: the address is allowed
    assert 400 <= response.status_code < 500 and "timed out" in response.json()["error"], response.text
    assert elapsed < 20, elapsed


def update_suffix() -> str:
    return f"{time.monotonic_ns() % 10**9}"


def test_a_read_token_sees_no_path_nor_credential(mysql_url, tmp_path, site):
    folder = tmp_path / "operator-secret-folder"
    folder.mkdir()
    gate = Gate.connect(migrated(mysql_url), upgrade=True)
    gate.register_dataset("local", str(write_rule_rows(folder / "labels.csv", 4)))
    gate.register_dataset("signed", f"{site}/ok.csv?X-Amz-Signature=SIGNATURE123&token=TOKEN456")
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    url, user = make_url(mysql_url), f"reader_{update_suffix()}"
    with gate.engine.begin() as conn:  # a warehouse login with a password
        conn.execute(text(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'PASSWORD789'"))
        conn.execute(text(f"GRANT SELECT ON `{url.database}`.* TO '{user}'@'%'"))
    query = "SELECT+'i1'+AS+item_id,+'yes'+AS+expected_decision"
    warehouse = url.set(username=user, password="PASSWORD789").render_as_string(hide_password=False)
    gate.register_dataset("warehouse", f"sql+{warehouse}?query={query}")
    gate.map_dataset("p1", "local", "0.5")
    update_id = gate.submit(rules_spec("p1"))
    gate.close()
    svc = Service(mysql_url, tmp_path)
    try:
        with svc.client("read") as reader:
            seen = [
                reader.get(path)
                for path in (
                    "/v1/datasets",
                    "/v1/datasets/local/versions",
                    "/v1/datasets/signed/versions",
                    "/v1/datasets/warehouse/versions",
                    "/v1/datasets/local/versions/0",
                    f"/v1/updates/{update_id}",
                    f"/v1/updates/{update_id}?view=wire",
                    "/datasets",
                )
            ]
    finally:
        svc.stop()
    for response in seen:
        assert response.status_code == 200, response.text
        body = response.text
        for secret in (str(tmp_path), "operator-secret-folder", "SIGNATURE123", "TOKEN456", "PASSWORD789"):
            assert secret not in body, (response.url, secret)
    assert "labels.csv" in seen[0].text and f"{site}/ok.csv" in seen[0].text and f"{user}:***@" in seen[0].text


def test_a_wrong_source_hosts_list_is_one_line(tmp_path):
    from support.cli import run_cli

    wrong = run_cli("serve", "--database-url", f"sqlite:///{tmp_path / 'g.db'}", "--source-hosts", "public,not a host!")
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1 and "neither a host name" in wrong.stderr
    from_env = run_cli(
        "serve", "--database-url", f"sqlite:///{tmp_path / 'g.db'}", env={"PROMPTGATE_SOURCE_HOSTS": "10.0.0.0/33"}
    )
    assert from_env.returncode == 2 and "neither a host name" in from_env.stderr, from_env.stderr


def test_a_dry_run_sync_shows_no_registered_path_nor_credential(mysql_url, tmp_path, site):
    """Hostile review: a pull request's token (submit) asks for the dry run of a config that
    re-points the operator's datasets; the plan's "before" was the registered source with
    only a user-info password masked, so it read back the server's folder and a signed
    URL's query-string signature and token. The plan shows sources as every other
    answer of the service does (``shown_source``)."""
    folder = tmp_path / "operator-secret-folder"
    folder.mkdir()
    gate = Gate.connect(migrated(mysql_url), upgrade=True)
    gate.register_dataset("local", str(write_rule_rows(folder / "labels.csv", 4)))
    gate.register_dataset("signed", f"{site}/ok.csv?X-Amz-Signature=SIGNATURE123&token=TOKEN456")
    gate.close()
    config = "datasets:\n  local: https://example.com/a.csv\n  signed: https://example.com/b.csv?token=MINE\n"
    svc = Service(mysql_url, tmp_path)
    try:
        with svc.client("submit") as ci:
            plan = ci.post("/v1/sync", json={"config": config, "path": "gate.yaml", "dry_run": True})
    finally:
        svc.stop()
    assert plan.status_code == 200, plan.text
    assert "labels.csv" in plan.text and "/ok.csv" in plan.text  # which source, still said
    for secret in (str(tmp_path), "operator-secret-folder", "SIGNATURE123", "TOKEN456"):
        assert secret not in plan.text, secret
