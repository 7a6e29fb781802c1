"""/metrics against a real `promptgate serve` on MariaDB while real `promptgate worker`
processes run real updates against the local model server: the fleet's gauges (from the
database) and the server's request counter move during a run; a worker host's
--metrics-port counts exactly the model calls the model server received, its waits for the
shared rate limit, and its 429s, summed over the processes of `--processes 2`."""

from __future__ import annotations

import threading
import time

import httpx2
from prometheus_client.parser import text_string_to_metric_families
from support.helpers import RULES, rules_spec, write_rule_rows
from support.migrated import migrated
from support.service_harness import Service, free_port
from support.workers_harness import WorkerFleet, worker_env

from gate.domain import Gate
from gate.mockllm import MockLLMServer
from gate.prompt.spec import parse_spec
from gate.service.metrics import FLEET_TTL


def parse(text: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of a scrape: (name, labels) -> value."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def scrape(client) -> dict:
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return parse(response.text)


def scrape_worker(port: int, timeout: float = 20.0) -> dict:
    """The worker host's metrics, once its port answers."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return parse(httpx2.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text)
        except httpx2.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def scrape_until(client, name: str, timeout: float = 10.0, **labels) -> dict:
    """Scrape until sample ``name{labels}`` is non-zero (the fleet's figures are read from
    the database at most once a second)."""
    deadline = time.monotonic() + timeout
    while not value(samples := scrape(client), name, **labels):
        assert time.monotonic() < deadline, f"{name}{labels} stayed 0"
        time.sleep(0.2)
    return samples


def metered_worker(db_url: str, llm: MockLLMServer, tmp_path, *args: str, **settings) -> tuple[WorkerFleet, int]:
    port = free_port()
    fleet = WorkerFleet(
        worker_env(db_url, llm.base_url, **settings),
        tmp_path,
        ("--role", "all", "--metrics-port", str(port), "--metrics-host", "127.0.0.1", *args),
    )
    fleet.start(1)
    return fleet, port


def test_fleet_and_request_metrics_move_during_a_run(service, tmp_path):
    gate = Gate.connect(service.db_url)
    gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 50, wrong_every=5)))
    gate.map_dataset("p1", "d1", "0.5")
    with (
        MockLLMServer(latency_ms=5) as llm,
        service.client(None) as anonymous,
        service.client("read") as reader,
        service.client("submit") as submitter,
    ):
        refused = anonymous.get("/metrics")
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        before = scrape(reader)
        assert value(before, "promptgate_fleet_up") == 1
        assert value(before, "promptgate_updates", status="PENDING") == 0
        assert value(before, "promptgate_items", state="MATCH") == 0

        posted = submitter.post("/v1/updates", json={"prompt": rules_spec("p1").to_config(), "mode": "check"})
        assert posted.status_code == 202, posted.text
        update_id = posted.json()["id"]
        waiting = scrape_until(reader, "promptgate_updates", status="PENDING")
        assert value(waiting, "promptgate_runs", status="PENDING") == 1
        assert value(waiting, "promptgate_oldest_pending_submission_seconds") >= 0

        long_poll = threading.Thread(
            target=submitter.get, args=(f"/v1/updates/{update_id}/wait",), kwargs={"params": {"timeout": 60}}
        )
        long_poll.start()
        # 50 calls at 15 a second (the shared rate limit), written back 4 at a time: a run of
        # about 3.5 s to watch, long enough for a few fresh reads of the fleet (one a second)
        fleet, port = metered_worker(
            service.db_url, llm, tmp_path, concurrency=2, chunk_size=4, rate_limits="mock-1=rpm:900,burst:1"
        )
        try:
            seen = watch_run(reader, update_id)
            long_poll.join(30)
            after = scrape_until(reader, "promptgate_updates", status="PASSED")
            calls = scrape_worker(port)
        finally:
            fleet.stop_all()
    gate.close()

    assert max(seen["MATCH"]) > 0, "no MATCH counted while the run was open"
    assert max(seen["workers"]) == 1 and max(seen["waiters"]) >= 1
    assert value(after, "promptgate_updates", status="PENDING") == 0
    assert value(after, "promptgate_runs", status="DONE") == 1
    assert value(after, "promptgate_items", state="MATCH") == 0  # open runs only: this one is done
    assert value(after, "promptgate_status_watcher_polls_total") > 0
    assert value(after, "promptgate_longpoll_waiters") == 0
    requests = "promptgate_http_requests_total"
    assert value(after, requests, route="/v1/updates", method="POST", status="202") == 1
    assert value(after, requests, route="/metrics", method="GET", status="401") == 1
    scrapes = [value(s, requests, route="/metrics", method="GET", status="200") or 0 for s in (before, after)]
    assert scrapes[1] > scrapes[0] + 3, scrapes  # a request is counted once answered: the next scrape shows it

    assert llm.stats()["requests"] == 50
    assert value(calls, "promptgate_model_call_seconds_count") == 50
    assert value(calls, "promptgate_model_call_seconds_sum") > 0
    assert value(calls, "promptgate_rate_limit_wait_seconds_total") > 0
    assert value(calls, "promptgate_model_rate_limited_total") == 0
    assert value(calls, "promptgate_model_errors_total", kind="rate_limit") == 0
    assert value(calls, "promptgate_model_calls_total", role="candidate") == 50  # by role: no judge here
    assert value(calls, "promptgate_model_calls_total", role="judge") == 0


def watch_run(reader, update_id: int, timeout: float = 60.0) -> dict[str, list[float]]:
    """Scrape until the update is terminal: what the fleet's gauges showed meanwhile."""
    seen = {"MATCH": [], "workers": [], "waiters": []}
    deadline = time.monotonic() + timeout
    while reader.get(f"/v1/updates/{update_id}").json()["status"] in ("PENDING", "RUNNING"):
        assert time.monotonic() < deadline, "the update did not end"
        samples = scrape(reader)
        seen["MATCH"].append(value(samples, "promptgate_items", state="MATCH"))
        seen["workers"].append(value(samples, "promptgate_workers"))
        seen["waiters"].append(value(samples, "promptgate_longpoll_waiters"))
        time.sleep(0.25)
    return seen


def test_public_read_and_request_labels_that_are_route_templates(mysql_url, tmp_path):
    """With --public-read no token is needed. No client can grow the label set: ids in
    paths, unknown paths and odd methods all fold into bounded values."""
    service = Service(mysql_url, tmp_path, "--public-read")
    try:
        with service.client(None) as anonymous:
            for update_id in (91, 92, 93):
                assert anonymous.get(f"/v1/updates/{update_id}").status_code == 404
            assert anonymous.get("/no/such/path-1").status_code == 404
            assert anonymous.get("/no/such/path-2").status_code == 404
            assert anonymous.request("TRACE", "/healthz").status_code == 405
            samples = scrape(anonymous)
    finally:
        service.stop()
    assert value(samples, "promptgate_fleet_up") == 1
    routes = {dict(labels)["route"] for name, labels in samples if name == "promptgate_http_requests_total"}
    assert routes == {"/v1/updates/{update_id}", "unmatched", "/healthz"}
    requests = "promptgate_http_requests_total"
    assert value(samples, requests, route="/v1/updates/{update_id}", method="GET", status="404") == 3
    assert value(samples, requests, route="unmatched", method="GET", status="404") == 2
    assert value(samples, requests, route="/healthz", method="other", status="405") == 1


def test_worker_metrics_count_429s_over_several_processes(mysql_url, tmp_path):
    """Every call answered 429 (the local server's forced status): the calls, the 429s and
    the errors by kind, summed over two worker processes, equal what the server received."""
    gate = Gate.connect(migrated(mysql_url), upgrade=True)
    gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 6)))
    gate.map_dataset("p1", "d1", "0.5")
    throttled = parse_spec(
        {
            "name": "p1",
            "model": "mock-error-429",
            "messages": [{"role": "system", "content": RULES}, {"role": "user", "content": "{{ item.text }}"}],
        }
    )
    update_id = gate.submit(throttled, "check")
    with MockLLMServer() as llm:
        fleet, port = metered_worker(
            mysql_url, llm, tmp_path, "--processes", "2", attempt_cap=2, backoff_base=0.05, backoff_max=0.1
        )
        try:
            assert gate.wait(update_id, timeout=60, poll=0.1).status == "FAILED"
            calls = scrape_worker(port)
        finally:
            fleet.stop_all()
        stats = llm.stats()
    gate.close()
    assert stats["requests"] == 12 == stats["outcomes"]["forced_error"]  # 6 items, 2 attempts each
    assert value(calls, "promptgate_model_call_seconds_count") == 12
    assert value(calls, "promptgate_model_rate_limited_total") == 12
    assert value(calls, "promptgate_model_errors_total", kind="rate_limit") == 12
    assert value(calls, "promptgate_model_errors_total", kind="server") == 0


def test_calls_saved_by_early_stop_and_reuse_are_counted(service, tmp_path):
    """promptgate_model_calls_saved_total{reason}: what finalize counted as each run ended —
    the calls an early stop saved, the answers reused — from the database, so any server
    shows the fleet's totals."""
    gate = Gate.connect(service.db_url)
    gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 400, wrong_every=2)))
    gate.map_dataset("p1", "d1", "0.9")
    with MockLLMServer() as llm, service.client("read") as reader:
        before = scrape(reader)
        assert {
            reason: value(before, "promptgate_model_calls_saved_total", reason=reason)
            for reason in ("early_stop", "reuse", "spend_cap")
        } == {"early_stop": 0, "reuse": 0, "spend_cap": 0}
        fleet, _ = metered_worker(service.db_url, llm, tmp_path, concurrency=2, chunk_size=4)
        try:
            stopped = gate.wait(gate.submit(rules_spec("p1")), timeout=60)
            again = gate.wait(gate.submit(rules_spec("p1"), full=True), timeout=60)
        finally:
            fleet.stop_all()
        time.sleep(FLEET_TTL)
        after = scrape(reader)
    gate.close()
    assert stopped.status == "REJECTED" and stopped.runs[0].stop["kind"] == "early_stop"
    saved = stopped.runs[0].stop["calls_saved"]
    assert saved > 200 and value(after, "promptgate_model_calls_saved_total", reason="early_stop") == saved
    assert value(after, "promptgate_model_calls_saved_total", reason="reuse") == again.runs[0].reused_total > 0


def test_calls_lost_with_a_killed_worker_are_bounded_in_the_report_status_json_and_metrics(service, tmp_path):
    """Issue 38: a worker killed with a call in flight. The report, `status --json` and
    /metrics say the calls recorded (32, one per item) and that at most 1 more may have
    been made (item 0's claim, which no write-back settled): between them, what the model
    server saw (33)."""
    import csv
    import json
    import signal

    from support.cli import run_cli

    from gate.report.text import render_text

    path = tmp_path / "d1.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "text"])
        for i in range(32):  # item 0 answers after 20 s on its first call: the worker is killed meanwhile
            w.writerow([f"i{i}", "yes", "alpha" + ("\ndelay_ms: 20000,0" if i == 0 else "")])
    gate = Gate.connect(service.db_url)
    gate.register_dataset("d1", str(path))
    gate.map_dataset("p1", "d1", "1")
    with MockLLMServer(latency_ms=5) as llm, service.client("read") as reader:
        fleet = WorkerFleet(worker_env(service.db_url, llm.base_url, lease_seconds=3), tmp_path)
        try:
            (first,) = fleet.start(1)
            uid = gate.submit(rules_spec("p1"), reuse=False)
            deadline = time.monotonic() + 60
            while not (llm.stats()["requests"] == 32 and llm.stats()["in_flight"] == 1):
                assert time.monotonic() < deadline, llm.stats()
                time.sleep(0.02)
            time.sleep(1.0)  # the 31 answered are written back
            fleet.kill(first, signal.SIGKILL)
            fleet.start(1)
            report = gate.wait(uid, timeout=60)
        finally:
            fleet.stop_all()
        time.sleep(FLEET_TTL)
        after = scrape(reader)
        calls = llm.stats()["requests"]
    status = json.loads(run_cli("status", str(uid), "--json", "--database-url", service.db_url).stdout)
    gate.close()
    assert report.status == "PASSED" and calls == 33
    assert (report.spend["calls_made"], report.spend["calls_unrecorded"]) == (32, 1)
    assert (status["spend"]["calls_made"], status["spend"]["calls_unrecorded"]) == (32, 1)
    assert "32 made (recorded); up to 1 more may have been made by workers that died" in render_text(report)
    assert value(after, "promptgate_model_calls_recorded_total") == 32
    assert value(after, "promptgate_model_calls_unrecorded_max_total") == 1
