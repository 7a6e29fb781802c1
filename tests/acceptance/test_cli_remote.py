"""The CLI through the gate's service: `promptgate` with PROMPTGATE_URL and PROMPTGATE_TOKEN
and no database URL anywhere in its environment prints what the same command prints with
--database-url on the same MariaDB database, and exits with the same code. Real parts: the
`promptgate serve` process, real worker processes and the local model server.

Each command runs both ways at once (two subprocesses), so the comparison costs one CLI
start-up, not two."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from support.cli import ROOT, run_cli
from support.workers_harness import WorkerFleet, worker_env

from gate.domain import Gate
from gate.prompt.spec import load_spec

EXAMPLE = Path(__file__).resolve().parents[2] / "prompts-example"
LIVE = EXAMPLE / "prompts" / "ticket-urgency.yaml"
DATASET = EXAMPLE / "datasets" / "urgency-regression.csv"
SHA_LIVE, SHA_CANDIDATE = "a" * 40, "b" * 40


@pytest.fixture
def no_gate_in_env(monkeypatch):
    """Neither URL comes from the test runner's environment."""
    for name in ("PROMPTGATE_DATABASE_URL", "PROMPTGATE_URL", "PROMPTGATE_TOKEN"):
        monkeypatch.delenv(name, raising=False)


class Both:
    """Runs a command through the service and on the database."""

    def __init__(self, service, scope: str = "admin"):
        self.service, self.token = service, service.tokens[scope]
        self.pool = ThreadPoolExecutor(2)

    def remote(self, *args, token: str | None = None):
        result = run_cli(*args, env={"PROMPTGATE_URL": self.service.url, "PROMPTGATE_TOKEN": token or self.token})
        assert "Traceback" not in result.stderr and (token or self.token) not in result.stdout + result.stderr
        return result

    def local(self, *args):
        return run_cli("--database-url", self.service.db_url, *args)

    def run(self, *args):
        """(remote, local) of the same command, run at the same time."""
        remote = self.pool.submit(self.remote, *args)
        local = self.pool.submit(self.local, *args)
        return remote.result(), local.result()

    def same(self, *args, code: int = 0, stderr: bool = False) -> str:
        """The command's stdout, after checking both ways print it (and with ``stderr`` their
        stderr) alike and exit ``code``. A dataset file: the operator sees its path, a
        caller of the service its name only."""
        remote, local = self.run(*args)
        assert (remote.returncode, local.returncode) == (code, code), (args, remote.stderr, local.stderr)
        assert str(DATASET) not in remote.stdout + remote.stderr, args
        assert remote.stdout == local.stdout.replace(str(DATASET), DATASET.name), args
        assert not stderr or remote.stderr == local.stderr, (remote.stderr, local.stderr)
        return remote.stdout + (remote.stderr if stderr else "")


def weaker_prompt(path: Path) -> Path:
    """The example prompt with two urgent rules dropped: it breaks items live gets right."""
    config = yaml.safe_load(LIVE.read_text())
    system = config["messages"][0]["content"]
    config["messages"][0]["content"] = system.replace("charged twice, ", "").replace("crash*, ", "")
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_every_command_prints_the_same_through_the_service(service, llm, tmp_path, no_gate_in_env):
    gate = Gate.connect(service.db_url)
    gate.register_dataset("urgency-regression", str(DATASET))
    gate.map_dataset("ticket-urgency", "urgency-regression", "0.5", bars={"max_broken": 0})
    gate.close()
    both = Both(service)

    submitted = both.remote("submit", LIVE, "--mode", "apply", "--sha", SHA_LIVE)
    assert submitted.returncode == 0 and submitted.stdout.strip().isdigit(), submitted.stderr
    live_id = int(submitted.stdout)
    assert "PENDING" in both.same("status", live_id, code=3)  # no worker yet: still open
    fleet = WorkerFleet(worker_env(service.db_url, llm.base_url), tmp_path)
    fleet.start(1)
    try:
        remote_wait = both.remote("wait", live_id, "--timeout", "60")
        assert remote_wait.returncode == 0 and f"update {live_id}: ticket-urgency (apply) APPLIED" in remote_wait.stdout
        assert remote_wait.stdout == both.local("wait", live_id).stdout
        candidate = both.remote(
            "submit", weaker_prompt(tmp_path / "weaker.yaml"), "--sha", SHA_CANDIDATE, "--full"
        )  # every item called: the whole report, through both paths
        candidate_id = int(candidate.stdout)
        rejected = both.same("wait", "--sha", SHA_CANDIDATE, "--mode", "check", "--timeout", "60", code=1)
    finally:
        fleet.stop_all()
    assert f"update {candidate_id}: ticket-urgency (check) REJECTED" in rejected and "broken 7" in rejected

    assert f"ticket-urgency v1 — applied by update #{live_id} (" in both.same("live", "ticket-urgency")
    assert both.same("history", "ticket-urgency").startswith("v1 (live)  ")
    assert json.loads(both.same("history", "ticket-urgency", "--json"))[0]["update"]["id"] == live_id
    assert (
        both.same("rollback", "ticket-urgency", "--reason", "x", code=2, stderr=True)
        == "error: prompt ticket-urgency has no version before 1 to roll back to\n"
    )
    shown = both.same("status", candidate_id, "--format", "markdown", code=1)
    assert "| items broken against live | 0 | 7 | ❌ fail |" in shown
    assert json.loads(both.same("status", candidate_id, "--json", code=1))["status"] == "REJECTED"
    assert both.same("report", live_id, candidate_id).count("ticket-urgency") >= 2
    assert (
        both.same("wait", "--sha", "c" * 40, "--timeout", "0.3", code=3, stderr=True)
        == f"error: no apply-mode update was submitted for commit {'c' * 40} and the Action's push job recorded "
        "nothing for it (wait needs the full SHA the Action or `promptgate submit --sha` used; `--mode check` "
        "answers for its checks)\n"
    )
    assert both.same("status", "999999", code=2, stderr=True) == "error: unknown update 999999\n"

    assert "urgency-regression\t" in both.same("dataset", "list")
    assert " rows\t" in both.same("dataset", "versions", "urgency-regression")
    assert "urgency-regression: " in both.same("dataset", "preview", "urgency-regression", "--rows", "3")
    mapped = both.same(
        "dataset", "map", "ticket-urgency", "urgency-regression", "--min-accuracy", "0.6", "--max-broken", "1"
    )
    assert mapped == "ticket-urgency × urgency-regression: min accuracy 0.6, max broken 1\n"

    cancels = [both.remote("submit", LIVE, "--source-key", "r"), both.local("submit", LIVE, "--source-key", "l")]
    remote_id, local_id = (int(c.stdout) for c in cancels)
    cancelled = both.remote("cancel", remote_id), both.local("cancel", local_id)
    assert [c.stdout.replace(str(i), "ID") for c, i in zip(cancelled, (remote_id, local_id))] == [
        "update ID: CANCELLED\n"
    ] * 2
    shown = both.same("status", remote_id, code=2)
    assert f"update {remote_id}: ticket-urgency (check) CANCELLED — cancelled by test-admin-" in shown


@pytest.fixture
def csv_site(tmp_path):
    """A plain HTTP server on loopback serving tmp_path/site (a dataset at a URL)."""
    folder = tmp_path / "site"
    folder.mkdir()
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def loopback_service(mysql_url, tmp_path):
    """The service allowing sources on loopback (where the tests' dataset server runs)."""
    from support import service_harness

    svc = service_harness.Service(mysql_url, tmp_path, "--source-hosts", "127.0.0.1/32")
    yield svc
    svc.stop()


def test_sync_through_the_service_reads_only_sources_the_server_reads(
    loopback_service, tmp_path, no_gate_in_env, csv_site
):
    service = loopback_service
    folder, base = csv_site
    (folder / "labels.csv").write_text(
        "item_id,expected_decision,text\n"
        + "".join(f"i{n},{'urgent' if n % 2 else 'normal'},text {n}\n" for n in range(6))
    )
    config = tmp_path / "gate.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "prices": {"gpt-4o-mini": {"input": 0.15, "output": 0.6}},
                "datasets": {"labels": {"source": f"{base}/labels.csv"}},
                "prompts": {"ticket-urgency": [{"dataset": "labels", "min_accuracy": 0.8, "max_broken": 0}]},
            }
        )
    )
    both = Both(service)
    plan = both.same("sync", config, "--dry-run")
    assert (
        f"would: dataset labels: new, source {base}/labels.csv" in plan and "would: bar ticket-urgency × labels" in plan
    )
    assert json.loads(both.same("sync", config, "--dry-run", "--json"))["applied"] is False
    synced = both.remote("sync", config)
    assert synced.returncode == 0 and synced.stdout == plan.replace("would: ", ""), synced.stderr
    assert both.same("sync", config) == f"{config}: the gate already matches\n"
    assert f"labels\t{base}/labels.csv" in both.same("dataset", "list")

    # a file source is read on the machine the command runs on, never on the server's: its
    # rows are uploaded from here, and a file outside the config's folder is not sent at all
    server_file = tmp_path / "server-side.yaml"
    server_file.write_text(
        yaml.safe_dump(
            {"datasets": {"d": {"source": str(DATASET)}}, "prompts": {"p": [{"dataset": "d", "min_accuracy": 0.5}]}}
        )
    )
    refused = both.remote("sync", server_file)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "is outside the gate config's folder" in refused.stderr
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "d.csv").write_bytes(DATASET.read_bytes())
    beside = tmp_path / "beside.yaml"
    beside.write_text(
        yaml.safe_dump(
            {"datasets": {"d": {"source": "data/d.csv"}}, "prompts": {"p": [{"dataset": "d", "min_accuracy": 0.5}]}}
        )
    )
    uploaded = both.remote("sync", beside)
    assert uploaded.returncode == 0 and "dataset d: new, source upload of " in uploaded.stdout, uploaded.stderr
    assert both.remote("sync", beside).stdout.endswith("the gate already matches\n")
    # nor an SQLite database file on the server, through a sql+ source
    sqlite_file = tmp_path / "server-side-sqlite.yaml"
    sqlite_file.write_text(
        yaml.safe_dump(
            {
                "datasets": {"d": {"source": "sql+sqlite:////etc/gate.db?query=SELECT+1"}},
                "prompts": {"p": [{"dataset": "d", "min_accuracy": 0.5}]},
            }
        )
    )
    refused = both.remote("sync", sqlite_file)
    assert refused.returncode == 2 and "the service reads no file on its machine" in refused.stderr


def test_refusals_are_one_line_and_exit_2(service, tmp_path, no_gate_in_env):
    both = Both(service)
    with ThreadPoolExecutor(4) as pool:
        wrong, read_submit, both_urls, worker, mangled = pool.map(
            lambda run: run(),
            [
                lambda: both.remote("status", "1", token="pg_not-a-real-token"),
                lambda: both.remote("submit", LIVE, token=service.tokens["read"]),
                lambda: both.remote("--gate-url", service.url, "status", "1", "--database-url", service.db_url),
                lambda: both.remote("worker"),
                lambda: both.remote("status", "1", token=service.tokens["admin"][:-1] + "é"),
            ],
        )
    assert (wrong.returncode, wrong.stderr) == (2, "error: invalid token\n")
    assert (mangled.returncode, mangled.stderr) == (
        2,
        "error: PROMPTGATE_TOKEN is not a token: printable ASCII "
        "without spaces, as `promptgate token create` prints it\n",
    )
    assert (read_submit.returncode, read_submit.stderr) == (
        2,
        "error: this token's scope (read) does not allow this: it needs submit\n",
    )
    assert (both_urls.returncode, both_urls.stderr) == (2, "error: give --gate-url or --database-url, not both\n")
    assert worker.returncode == 2 and worker.stderr == (
        "error: `promptgate worker` works on the gate's database, not through its service: give --database-url URL "
        "(or PROMPTGATE_DATABASE_URL)\n"
    )

    service.stop()  # PROMPTGATE_URL wins over PROMPTGATE_DATABASE_URL: the service, which is down
    down = run_cli(
        "status",
        "1",
        env={"PROMPTGATE_URL": service.url, "PROMPTGATE_TOKEN": both.token, "PROMPTGATE_DATABASE_URL": service.db_url},
    )
    assert down.returncode == 2 and down.stdout == "" and both.token not in down.stderr
    assert re.fullmatch(
        rf"error: cannot reach the gate at {re.escape(service.url)}: .*Connection refused.*\n", down.stderr
    ), down.stderr


def test_a_wait_outlives_a_restart_of_the_service(service, tmp_path, no_gate_in_env, monkeypatch):
    """A wait the service has answered asks again while the service restarts (a deploy)."""
    from support import service_harness

    gate = Gate.connect(service.db_url)
    try:
        gate.register_dataset("urgency-regression", str(DATASET))
        gate.map_dataset("ticket-urgency", "urgency-regression", "0.5")
        update_id = gate.submit(load_spec(LIVE))
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PROMPTGATE_URL": service.url,
            "PROMPTGATE_TOKEN": service.tokens["submit"],
        }
        waiting = subprocess.Popen(
            [sys.executable, "-m", "gate.cli", "wait", str(update_id), "--timeout", "60"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert waiting.stderr.readline()  # a progress line: the service has answered the wait
        service.stop()
        monkeypatch.setattr(service_harness, "free_port", lambda: service.port)
        again = service_harness.Service(service.db_url, tmp_path)
        try:
            gate.cancel(update_id)
            out, _ = waiting.communicate(timeout=60)
        finally:
            again.stop()
    finally:
        gate.close()
    assert waiting.returncode == 2 and f"update {update_id}: ticket-urgency (check) CANCELLED" in out


def test_rollback_through_the_service_records_the_token(service, tmp_path, no_gate_in_env, monkeypatch):
    from support.helpers import rules_spec, write_rule_rows

    from gate.mockllm import MockLLMServer
    from workers.supervisor import run_until_terminal

    gate = Gate.connect(service.db_url)
    gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 4)))
    gate.map_dataset("p1", "d1", "0.5")
    with MockLLMServer(latency_ms=0) as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        for description in ("A", "B"):
            (report,) = run_until_terminal(gate, [gate.submit(rules_spec("p1", description), "apply")], timeout=60)
            assert report.status == "APPLIED"
    both = Both(service)
    refused = both.remote("rollback", "p1", "--reason", "B is wrong", token=service.tokens["submit"])
    assert refused.returncode == 2 and "needs admin" in refused.stderr
    stale = both.remote("rollback", "p1", "--if-live", "1", "--reason", "B is wrong")
    assert stale.returncode == 2 and stale.stderr == (
        "error: prompt p1: the live version is 2, not 1 as seen: nothing was rolled back; look again and retry\n"
    )
    done = both.remote("rollback", "p1", "--if-live", "2", "--reason", "B is wrong", "--actor", "alice")
    assert done.returncode == 0 and done.stdout.startswith("p1: version 3 is live (the config of version 1)\n"), (
        done.stderr
    )
    assert "p1: the config rolled back away from is held" in done.stdout  # issue 35.3
    history = both.same("history", "p1").splitlines()
    assert history[0].startswith("v3 (live)") and "rollback to v1 by token test-admin-" in history[0]
    assert history[0].endswith(" for alice: B is wrong")
    assert gate.live("p1").config["description"] == "A"
    gate.close()
