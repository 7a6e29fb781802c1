"""A stuck call thread looks stuck: each worker records the age of its oldest model call in
flight with its heartbeat, and `promptgate workers` shows it (text and --json). A
heartbeat alone only proves the process lives."""

from __future__ import annotations

import json
import re
import time

from support.cli import run_cli
from support.helpers import rules_spec, write_rule_rows
from support.workers_harness import WorkerFleet, worker_env

from gate.mockllm import MockLLMServer


def workers_json(url: str) -> list[dict]:
    out = run_cli("workers", "--json", "--database-url", url)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_workers_shows_the_age_of_each_workers_oldest_call(mysql_gate, tmp_path):
    gate = mysql_gate
    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 2)))
    gate.map_dataset("p1", "d", "0.5")
    url = gate.settings.database_url
    llm = MockLLMServer(timeout_rate=1.0, hang_seconds=60).start()  # every call hangs
    fleet = WorkerFleet(worker_env(url, llm.base_url, heartbeat_seconds=0.5, request_timeout=60), tmp_path)
    try:
        fleet.start(1)
        deadline = time.monotonic() + 60
        while not workers_json(url) and time.monotonic() < deadline:
            time.sleep(0.2)
        (idle,) = workers_json(url)
        assert idle["oldest_call_seconds"] is None
        gate.submit(rules_spec("p1"), "check")
        while llm.stats()["in_flight"] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(3)
        (stuck,) = workers_json(url)
        text = run_cli("workers", "--database-url", url).stdout
    finally:
        llm.stop()  # the hung calls end, so the worker's drain does not wait for them
        fleet.stop_all()
    assert 2.5 <= stuck["oldest_call_seconds"] < 30, stuck
    age = float(re.search(r"oldest call (\d+\.\d)s", text).group(1))
    assert 2.5 <= age < 30, text
