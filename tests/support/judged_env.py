"""The fixtures the judged runs' tests share (a module imports them by name): ``llm``, the
project's local model server as the default provider for one test, and ``workers``, real
worker processes on the test's gate, stopped when it ends."""

from __future__ import annotations

import pytest

from gate.mockllm import MockLLMServer

from .workers_harness import WorkerFleet, worker_env


@pytest.fixture
def llm(monkeypatch):
    with MockLLMServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield server


@pytest.fixture
def workers(tmp_path):
    """``start(gate, llm, processes=1, **settings)``: a fleet of worker processes (chunks of
    8, 4 calls in flight unless ``settings`` say otherwise)."""
    fleets = []

    def start(gate, llm, processes=1, **settings):
        env = worker_env(gate.settings.database_url, llm.base_url, **{"chunk_size": 8, "concurrency": 4, **settings})
        fleet = WorkerFleet(env, tmp_path)
        fleet.start(processes)
        fleets.append(fleet)
        return fleet

    yield start
    for fleet in fleets:
        fleet.stop_all()
