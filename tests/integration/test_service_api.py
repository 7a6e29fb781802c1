"""The HTTP service against MariaDB, through a real `promptgate serve` and a real HTTP
client: submissions (YAML and JSON bodies), reports, long-poll waits that share one
watcher, cancel, and the error boundary (one JSON line, never a traceback or SQL)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx2
import pytest
from sqlalchemy import text
from support.helpers import rules_spec, write_rule_rows
from support.service_harness import Service

from gate.contract.codec import decode
from gate.domain import Gate
from gate.report.update import UpdateReport
from workers.supervisor import run_until_terminal

PROMPT_YAML = """\
name: p1
model: mock-1
messages:
  - role: system
    content: "Classify the message.\\n- yes: alpha\\n- no: beta\\ndefault: no"
  - role: user
    content: "{{ item.text }}"
"""


def mapped_gate(service, tmp_path: Path, rows: int = 20) -> Gate:
    gate = Gate.connect(service.db_url)
    gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", rows, wrong_every=5)))
    gate.map_dataset("p1", "d1", "0.5")
    return gate


def questions(gate: Gate) -> int:
    with gate.engine.connect() as conn:
        return int(conn.execute(text("SHOW GLOBAL STATUS LIKE 'Questions'")).one()[1])


def test_submit_wait_and_report_over_http(service, tmp_path, model):
    gate = mapped_gate(service, tmp_path)
    with service.client("submit") as ci:  # what pull-request CI holds: check mode only
        refused = ci.post(
            "/v1/updates", content=PROMPT_YAML, params={"mode": "apply"}, headers={"content-type": "application/yaml"}
        )
        assert refused.status_code == 403 and "does not allow apply mode" in refused.json()["error"]
    with service.client("admin") as client:
        posted = client.post(
            "/v1/updates",
            content=PROMPT_YAML,
            params={"mode": "apply", "sha": "a" * 40},
            headers={"content-type": "application/yaml"},
        )
        assert posted.status_code == 202, posted.text
        update_id = posted.json()["id"]
        assert posted.json()["prompt"] == "p1" and posted.json()["mode"] == "apply"
        as_json = client.post(
            "/v1/updates", json={"prompt": rules_spec("p1").to_config(), "mode": "check", "source_key": "pr-7"}
        )
        assert as_json.status_code == 202, as_json.text

        woke = {}

        def waiter():
            response = client.get(f"/v1/updates/{update_id}/wait", params={"timeout": 60, "view": "wire"})
            woke.update(at=time.monotonic(), response=response)

        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.5)
        assert "at" not in woke, "the long-poll returned before the update ended"
        run_until_terminal(gate, [update_id, as_json.json()["id"]], timeout=120)
        ended = time.monotonic()
        thread.join(10)
        assert woke["response"].status_code == 200
        assert woke["at"] - ended < 1.0, f"the waiter woke {woke['at'] - ended:.2f} s after the update ended"

        report = decode(UpdateReport, woke["response"].json())
        assert report.status == "APPLIED" and report.exit_code == 0
        assert report.update.source["submitted_by"].startswith("test-admin-")
        assert report.runs[0].scored == 20 and report.runs[0].matches == 16
        local = gate.status(update_id).to_dict()  # the operator's: the file's path on the server
        assert local["runs"][0]["source_uri"] == str(tmp_path / "d1.csv")
        local["runs"][0]["source_uri"] = "d1.csv"  # any caller's: its name only
        assert report.to_dict() == local
        documented = client.get(f"/v1/updates/{update_id}").json()  # the `status --json` document
        assert documented == json.loads(json.dumps(local, default=str))
        by_sha = client.get("/v1/updates", params={"sha": "a" * 40}).json()
        assert [u["id"] for u in by_sha] == [update_id]
    gate.close()


def test_a_wait_times_out_on_an_open_update_and_cancel_ends_it(service, tmp_path):
    gate = mapped_gate(service, tmp_path)
    with service.client("submit") as client:  # a submit token cancels the updates it submitted
        update_id = client.post("/v1/updates", json={"prompt": rules_spec("p1").to_config()}).json()["id"]
        started = time.monotonic()
        response = client.get(f"/v1/updates/{update_id}/wait", params={"timeout": 0.6})
        assert 0.5 <= time.monotonic() - started < 2.0
        assert response.status_code == 200 and response.json()["status"] == "PENDING"
        assert client.post(f"/v1/updates/{update_id}/cancel").json() == {"id": update_id, "status": "CANCELLED"}
        again = client.get(f"/v1/updates/{update_id}/wait", params={"timeout": 30})
        assert again.json()["status"] == "CANCELLED"
        assert "through the service" in again.json()["reason"]
        missing = client.get("/v1/updates/999999/wait", params={"timeout": 5})
        assert missing.status_code == 404 and missing.json()["error"] == "unknown update 999999"
    gate.close()


def test_waiters_share_one_watcher(service, tmp_path):
    """60 long-polls on open updates for ~2 s cost the database a few queries a second in
    all (one IN read per beat), not one per waiter per beat."""
    gate = mapped_gate(service, tmp_path)
    ids = [gate.submit(rules_spec("p1"), "check", source={"key": f"k{i}"}) for i in range(3)]
    with service.client("submit", limits=httpx2.Limits(max_connections=100)) as client:
        before = questions(gate)
        threads = [
            threading.Thread(
                target=client.get, args=(f"/v1/updates/{ids[i % 3]}/wait",), kwargs={"params": {"timeout": 2}}
            )
            for i in range(60)
        ]
        started = time.monotonic()
        for t in threads:  # 20 ms apart: their timeouts too (as on a loaded machine, where
            t.start()  # CI counted 334 when a report was built per waiter that timed out)
            time.sleep(0.02)
        for t in threads:
            t.join(30)
        elapsed = time.monotonic() - started
        spent = questions(gate) - before
    # measured: ~150 (the token checked once, ~13 beats, the reports at the timeout built
    # once per update a second); a status read per waiter per beat alone would add 60 x 13
    assert spent < 250, f"{spent} queries for 60 waiters in {elapsed:.1f} s"
    gate.close()


def test_errors_are_one_json_line(service, tmp_path):
    mapped_gate(service, tmp_path).close()
    with service.client("admin") as client:
        bad_yaml = client.post("/v1/updates", content="name: [unclosed", headers={"content-type": "application/yaml"})
        assert bad_yaml.status_code == 400
        hostile = client.post(
            "/v1/updates",
            json={
                "prompt": {
                    "name": "p1",
                    "model": "mock-1",
                    "base_url": "http://evil",
                    "messages": [{"role": "user", "content": "x"}],
                }
            },
        )
        assert hostile.status_code == 400 and "base_url" in hostile.json()["error"]
        not_object = client.post("/v1/updates", content="[1, 2]", headers={"content-type": "application/json"})
        assert not_object.status_code == 400
        deep = client.post("/v1/updates", content="[" * 100_000, headers={"content-type": "application/json"})
        assert deep.status_code == 400
        too_big = client.post(
            "/v1/updates", content=b"x" * (1024 * 1024 + 1), headers={"content-type": "application/yaml"}
        )
        assert too_big.status_code == 413
        unknown_route = client.get("/v1/nothing-here")
        assert unknown_route.status_code == 404
        file_source = client.post("/v1/datasets", json={"name": "etc", "source": "/etc/passwd"})
        assert file_source.status_code == 400 and "no file on its machine" in file_source.json()["error"]
        for source in ("file:///etc/passwd", "sql+sqlite:////etc/gate.db?query=SELECT+1", " /etc/passwd"):
            refused = client.post("/v1/datasets", json={"name": "etc", "source": source})
            assert refused.status_code == 400 and "no file on its machine" in refused.json()["error"], source
        for response in (bad_yaml, hostile, not_object, deep, too_big, unknown_route, file_source):
            body = response.json()
            assert set(body) >= {"error"} and "\n" not in body["error"]
            assert "Traceback" not in response.text and "SELECT" not in response.text
    assert "Traceback" not in service.log() or "internal error" in service.log()


def test_readyz_says_when_the_schema_is_behind(service):
    import httpx2

    assert httpx2.get(service.url + "/readyz").status_code == 200
    gate = Gate.connect(service.db_url)
    with gate.engine.begin() as conn:
        conn.execute(text("DELETE FROM schema_migration WHERE version = 7"))
    response = httpx2.get(service.url + "/readyz")
    assert response.status_code == 503 and "promptgate db upgrade" in response.json()["error"]
    gate.close()


def test_sources_sent_to_the_service_read_nothing_of_the_servers(service, tmp_path):
    """A token holder cannot make the server send its environment (${VAR}) to a URL of the
    caller's choosing, nor read a file through a sql+ source's query_file or driver
    options; a pull request's check may dry-run a sync (submit), only admin may sync."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    hostile = {
        f"http://127.0.0.1:{port}/d.csv?k=${{PROMPTGATE_DATABASE_URL}}": "server's environment",
        f"sql+mysql+pymysql://u@127.0.0.1:{port}/db?query_file=/etc/hostname": "'query_file'",
        f"sql+mysql+pymysql://u@127.0.0.1:{port}/db?query=SELECT+1&local_infile=1": "'local_infile'",
        f"sql+mysql+pymysql://u:${{OPENAI_API_KEY}}@127.0.0.1:{port}/db?query=SELECT+1": "server's environment",
    }
    with service.client("admin") as admin:
        for source, why in hostile.items():
            refused = admin.post("/v1/datasets", json={"name": "exfil", "source": source})
            assert refused.status_code == 400 and why in refused.json()["error"], (source, refused.text)
            config = f"datasets: {{exfil: {{source: '{source}'}}}}\nprompts: {{}}\n"
            synced = admin.post("/v1/sync", json={"config": config})
            assert synced.status_code == 400 and why in synced.json()["error"], (source, synced.text)
    try:
        connection, _ = listener.accept()
        connection.close()
        raise AssertionError("the server connected to the caller's listener")
    except TimeoutError:
        pass
    finally:
        listener.close()
    with service.client("submit") as ci:
        config = "datasets: {}\nprompts: {}\n"
        assert ci.post("/v1/sync", json={"config": config, "dry_run": True}).status_code == 200
        refused = ci.post("/v1/sync", json={"config": config})
        assert refused.status_code == 403 and "does not allow a sync" in refused.json()["error"]


def test_a_database_error_before_the_caller_is_known_says_nothing_of_the_database(service):
    """The token check is the first read of a request: when it fails, an unauthenticated
    caller learns neither the database's host nor its error text."""
    gate = Gate.connect(service.db_url)
    with gate.engine.begin() as conn:
        conn.execute(text("RENAME TABLE api_token TO api_token_away"))
    try:
        response = httpx2.get(service.url + "/v1/datasets", headers={"Authorization": "Bearer pgt_" + "C" * 43})
        assert response.status_code == 503
        assert response.json() == {"error": "the gate's database is unreachable; try again shortly", "exit_code": 2}
    finally:
        with gate.engine.begin() as conn:
            conn.execute(text("RENAME TABLE api_token_away TO api_token"))
        gate.close()


ACCOUNT_TIER_PROMPT = {
    "name": "p1",
    "model": "mock-1",
    "labels": ["yes", "no"],
    "messages": [
        {"role": "system", "content": "Classify the message.\n- yes: alpha\ndefault: no"},
        {
            "role": "user",
            "content": "{% if item.account_tier is defined %}{{ item.account_tier }}: "
            "{{ item.text }}{% else %}{{ item.text }}{% endif %}",
        },
    ],
}


def warehouse_config(db_url: str, optional: dict | None = None) -> str:
    """A gate config over two sql+ datasets in the service's own MariaDB (a source the
    service reads for a caller), neither with an account_tier column."""
    from urllib.parse import quote_plus

    source = (
        "sql+" + db_url + "?query=" + quote_plus("SELECT item_id, expected_decision, text FROM tickets WHERE k = {}")
    )
    config = {
        "datasets": {
            "t-even": {"source": source.replace("%7B%7D", "0")},
            "t-odd": {"source": source.replace("%7B%7D", "1")},
        },
        "prompts": {"p1": [{"dataset": "t-even", "min_accuracy": 0.5}, {"dataset": "t-odd", "min_accuracy": 0.5}]},
    }
    if optional:
        config["optional_fields"] = optional
    return json.dumps(config)  # JSON is YAML


@pytest.fixture
def loopback_service(mysql_url, tmp_path):
    """`promptgate serve` whose operator lets sources reach the loopback test servers."""
    svc = Service(mysql_url, tmp_path, "--source-hosts", "127.0.0.1/32")
    yield svc
    svc.stop()


def reader_url(db_url: str) -> str:
    """The test database's URL for a reading user with a password (the service reads a
    caller's sql+ source only with a host and credentials)."""
    from sqlalchemy.engine import make_url

    url = make_url(db_url)
    gate = Gate.connect(db_url)
    try:
        with gate.engine.begin() as conn:
            conn.execute(text("CREATE USER IF NOT EXISTS 'reader'@'%' IDENTIFIED BY 'reader-pw'"))
            conn.execute(text(f"GRANT SELECT ON `{url.database}`.* TO 'reader'@'%'"))
    finally:
        gate.close()
    return url.set(username="reader", password="reader-pw").render_as_string(hide_password=False)


def test_a_template_reading_a_field_no_row_has_is_refused_unless_the_synced_config_says_optional(loopback_service):
    """Issue 23, item 6, through the service: the account_tier template is refused at
    submit naming the field and the datasets; the same template is accepted once a gate
    config synced through /v1/sync declares the field optional, and the report lists the
    fields read with their coverage."""
    gate = Gate.connect(loopback_service.db_url)
    try:
        with gate.engine.begin() as conn:
            conn.execute(
                text(
                    "CREATE TABLE tickets (item_id VARCHAR(20) PRIMARY KEY, expected_decision VARCHAR(8), "
                    "text VARCHAR(64), k INT)"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO tickets VALUES ('a', 'yes', 'alpha', 0), ('b', 'no', 'beta', 1), "
                    "('c', 'no', 'gamma', 0), ('d', 'yes', 'alpha two', 1)"
                )
            )
    finally:
        gate.close()
    source_url = reader_url(loopback_service.db_url)
    with loopback_service.client("admin") as admin, loopback_service.client("submit") as ci:
        synced = admin.post("/v1/sync", json={"config": warehouse_config(source_url), "path": "gate.yaml"})
        assert synced.status_code == 200, synced.text
        refused = ci.post("/v1/updates", json={"prompt": ACCOUNT_TIER_PROMPT})
        assert refused.status_code == 400
        assert refused.json()["error"] == (
            "the gate cannot evaluate what account_tier changes: no row of t-even, t-odd has it (add rows that do, "
            "or declare it under optional_fields: p1: in the gate config)"
        )
        assert admin.get("/v1/updates").json() == []  # nothing staged

        planned = ci.post(
            "/v1/sync", json={"config": warehouse_config(source_url, {"p1": ["account_tier"]}), "dry_run": True}
        )
        assert (
            planned.status_code == 200
            and ci.post("/v1/updates", json={"prompt": ACCOUNT_TIER_PROMPT}).status_code == 400
        )  # a dry run changes nothing
        synced = admin.post("/v1/sync", json={"config": warehouse_config(source_url, {"p1": ["account_tier"]})})
        assert synced.status_code == 200, synced.text
        assert [c["kind"] for c in synced.json()["changes"]] == ["optional-fields"]
        accepted = ci.post("/v1/updates", json={"prompt": ACCOUNT_TIER_PROMPT})
        assert accepted.status_code == 202, accepted.text
        report = admin.get(f"/v1/updates/{accepted.json()['id']}").json()
        assert {r["dataset"]: r["fields_read"] for r in report["runs"]} == {
            name: [
                {"field": "account_tier", "rows": 0, "of": 2, "optional": True},
                {"field": "text", "rows": 2, "of": 2, "optional": False},
            ]
            for name in ("t-even", "t-odd")
        }


def test_a_name_with_a_trailing_newline_and_labels_read_as_one_are_refused(service, tmp_path):
    """Issue 23, item 8: names match in full ("p1\\n" is no name: a regex anchored with $
    let it through), and two labels the decision step reads as the same are refused,
    naming both (p1 is gated: nothing else refuses them)."""
    mapped_gate(service, tmp_path).close()
    with service.client("submit") as ci:
        named = ci.post("/v1/updates", json={"prompt": {**rules_spec("p1").to_config(), "name": "p1\n"}})
        assert named.status_code == 400 and "'p1\\n' is not a valid name" in named.json()["error"], named.text
        labels = ci.post(
            "/v1/updates",
            json={"prompt": {**rules_spec("p1").to_config(), "labels": ["eligible", "not eligible", "Not-Eligible"]}},
        )
        assert labels.status_code == 400, labels.text
        assert labels.json()["error"] == (
            "labels: 'not eligible' and 'Not-Eligible' are read as the same label by the decision step (case, "
            "surrounding punctuation and markdown, and ' ', '_', '-' do not count): keep one"
        )


def test_list_updates_and_updates_for_sha_answer_alike_on_the_database_and_through_the_service(service, tmp_path):
    """One API shape: RemoteGate takes ``list_updates``'s filters as Gate does (status, SHA
    prefix, the page before an id) and ``updates_for_sha``'s release mode, and answers the
    same updates."""
    from gate.client.remote import RemoteGate
    from gate.errors import UsageError

    gate = mapped_gate(service, tmp_path)
    gate.map_dataset("p2", "d1", "0.5")
    shas = ["ab" * 20, "ab" * 20, "cd" * 20, "abcd" * 10]
    ids = [
        gate.submit(rules_spec(name), mode, {"sha": sha, "key": f"k{i}"})
        for i, (name, mode, sha) in enumerate(zip(("p1", "p1", "p1", "p2"), ("check", "apply", "check", "check"), shas))
    ]
    gate.cancel(ids[2])
    remote = RemoteGate(service.url, service.tokens["read"])
    try:
        for args, kwargs in [
            ((), {}),
            ((2,), {}),
            ((20, "p1"), {}),
            ((), {"status": "CANCELLED"}),
            ((), {"sha_prefix": "abab"}),
            ((), {"sha_prefix": "ABCD"}),
            ((), {"before_id": ids[2]}),
            ((20, "p1"), {"status": "PENDING", "sha_prefix": "ab", "before_id": ids[3]}),
        ]:
            assert [u.id for u in remote.list_updates(*args, **kwargs)] == [
                u.id for u in gate.list_updates(*args, **kwargs)
            ], (args, kwargs)
        for args in [
            (shas[0],),
            (shas[0], "p1"),
            (shas[0], None, "apply"),
            (shas[0], None, "check"),
            (shas[0], None, "auto"),
            (shas[2], "p1", "apply"),
        ]:
            assert [u.id for u in remote.updates_for_sha(*args)] == [u.id for u in gate.updates_for_sha(*args)], args
        assert [u.id for u in remote.updates_for_sha(shas[0], None, "apply")] == [ids[1]]
        with pytest.raises(UsageError, match="go without sha"):
            remote._call("GET", "/v1/updates", params={"sha": shas[0], "status": "PENDING"})
        with pytest.raises(UsageError):
            remote.list_updates(status="DONE")  # a run's status, not an update's
    finally:
        remote.close()
        gate.close()
