"""The production runtime reads the environment as the CLI does (issue 50.4), against a real
`promptgate serve` (uvicorn) on MariaDB: with ``PROMPTGATE_URL`` and ``PROMPTGATE_TOKEN`` set
(what README tells every command to use), ``PromptRuntime()`` connected to a new SQLite file
in the current folder and failed with "no such table: prompt". Now it reads the service with
production's own token (``PROMPTGATE_RUNTIME_TOKEN``, never the CLI's), else the database
URL; explicit arguments win; it says once which and why. And while the service is down, one
line says so and one says when it is back: not a traceback per prompt per refresh."""

from __future__ import annotations

import logging
import time

import pytest
from support.canary import TRAFFIC, gate_config, prompt_spec
from support.mariadb_server import create_database
from support.migrated import migrated
from support.runtime_process import RuntimeFleet
from support.service_harness import Service

from gate import gateconfig
from gate.domain import Gate
from gate.errors import UsageError
from gate.mockllm import MockLLMServer
from gate.production.sources import DatabaseSource, ServiceSource
from gate.runtime import PromptRuntime
from workers.supervisor import run_until_terminal

VARIABLES = ("PROMPTGATE_URL", "PROMPTGATE_TOKEN", "PROMPTGATE_RUNTIME_TOKEN", "PROMPTGATE_DATABASE_URL")


@pytest.fixture(scope="module")
def served(mysql_server, tmp_path_factory):
    """p1 v1 live on a fresh MariaDB database, its service running, the model server up."""
    folder = tmp_path_factory.mktemp("runtime-env")
    url = create_database(mysql_server[0], f"pg_test_env_{time.monotonic_ns()}")
    with MockLLMServer(latency_ms=1) as llm, pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_BASE_URL", llm.base_url)
        mp.setenv("OPENAI_API_KEY", "test-key")
        gate = Gate.connect(migrated(url), upgrade=True)
        gateconfig.sync(gate, gate_config(folder))
        run_until_terminal(gate, [gate.submit(prompt_spec("v1"), "apply")])
        gate.close()
        service = Service(url, folder)
        service.llm_url = llm.base_url  # type: ignore[attr-defined]  # for the production processes
        try:
            yield service
        finally:
            service.stop()


@pytest.fixture
def env(monkeypatch, tmp_path):
    """A clean environment of the gate's variables, in an empty folder."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def chosen(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("prompt-gate runtime: reading")]


def test_the_runtime_reads_the_service_from_the_environment_with_its_own_token(served, env, caplog, tmp_path):
    env.setenv("PROMPTGATE_URL", served.url)
    env.setenv("PROMPTGATE_TOKEN", served.tokens["admin"])  # the CLI's: never production's
    with pytest.raises(UsageError, match="needs a token: token= or PROMPTGATE_RUNTIME_TOKEN"):
        PromptRuntime(report=False)
    env.setenv("PROMPTGATE_RUNTIME_TOKEN", served.tokens["runtime"])
    with caplog.at_level(logging.INFO, logger="gate.runtime"):
        rt = PromptRuntime(report=False, flush_at_exit=None)
    try:
        assert isinstance(rt._source, ServiceSource) and rt.prompt("p1").version == 1
        assert rt.decide("p1", {"text": "alpha"}).decision == "yes"
        assert rt.target.token == served.tokens["runtime"]
        assert chosen(caplog) == [
            f"prompt-gate runtime: reading prompts from the gate's service {served.url} "
            "(PROMPTGATE_URL; its token from PROMPTGATE_RUNTIME_TOKEN)"
        ]
    finally:
        rt.close()
    assert not list(tmp_path.iterdir())  # no SQLite file made in the current folder

    # the database URL when production has no token of its own, saying why; explicit arguments win
    env.delenv("PROMPTGATE_RUNTIME_TOKEN")
    env.setenv("PROMPTGATE_DATABASE_URL", served.db_url)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="gate.runtime"):
        on_db = PromptRuntime(report=False, flush_at_exit=None)
        explicit = PromptRuntime(gate_url=served.url, token=served.tokens["runtime"], report=False, flush_at_exit=None)
    try:
        assert isinstance(on_db._source, DatabaseSource) and on_db.prompt("p1").version == 1
        assert (
            "(PROMPTGATE_DATABASE_URL; PROMPTGATE_URL is set but PROMPTGATE_RUNTIME_TOKEN is not" in chosen(caplog)[0]
        )
        assert isinstance(explicit._source, ServiceSource) and explicit.prompt("p1").version == 1
        assert chosen(caplog)[1].endswith("(gate_url= given; its token from token=)")
    finally:
        on_db.close()
        explicit.close()


def test_a_production_process_configured_by_its_environment_alone(served, tmp_path):
    """A real process (support.runtime_process) with the CLI's variables and production's
    token: it serves through the service on its runtime token, loads no database client, and
    says which gate and why."""
    env = {
        "OPENAI_BASE_URL": served.llm_url,
        "OPENAI_API_KEY": "test-key",
        "PROMPTGATE_URL": served.url,
        "PROMPTGATE_TOKEN": served.tokens["admin"],
        "PROMPTGATE_RUNTIME_TOKEN": served.tokens["runtime"],
        "PROMPTGATE_DATABASE_URL": "",
    }
    fleet = RuntimeFleet(tmp_path, env)
    try:
        fleet.start(from_env=True, ttl=5, prompt="p1", items=TRAFFIC, keys=10, rate=50, duration=1.5)
        stats = fleet.finish(0, timeout=60)
    finally:
        fleet.kill_all()
    assert stats.get("done") and stats["calls"] > 0 and stats["errors"] == 0, (stats, fleet.log(0))
    assert stats["by_version"] == {"1": stats["calls"]} and stats["sqlalchemy_loaded"] is False
    assert (
        stats["target"] == f"the gate's service {served.url} (PROMPTGATE_URL; its token from PROMPTGATE_RUNTIME_TOKEN)"
    )


def test_a_gate_that_is_down_is_said_once_and_once_when_it_is_back(served, env, caplog):
    """A refresh every 0.2 s against a stopped service for 1.5 s: seven failed refreshes, one
    line (no traceback), and one line when the service answers again. (The last test of the
    module: it stops the module's service.)"""
    rt = PromptRuntime(gate_url=served.url, token=served.tokens["runtime"], ttl=0.2, report=False, flush_at_exit=None)
    again = None
    try:
        assert rt.decide("p1", {"text": "alpha"}).version == 1
        with caplog.at_level(logging.DEBUG, logger="gate.runtime"):
            served.stop()
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                assert rt.decide("p1", {"text": "alpha"}).version == 1  # the last version keeps serving
                time.sleep(0.05)
            down = [r for r in caplog.records if r.levelno >= logging.WARNING]
            assert len(down) == 1 and down[0].exc_info is None, [r.getMessage() for r in down]
            assert rt._refresh.failures >= 5, rt._refresh.failures
            assert down[0].getMessage().startswith("cannot refresh prompts from the gate (cannot reach the gate:")
            assert "prompt p1 keeps serving version 1; said once, until it answers again" in down[0].getMessage()
            again = Service(served.db_url, served.log_path.parent, port=served.port)  # back where it was
            time.sleep(0.25)
            rt.decide("p1", {"text": "alpha"})
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(said) == 2 and said[1].startswith("the gate answers again (refresh prompts from the gate: "), said
    finally:
        rt.close()
        if again is not None:
            again.stop()
