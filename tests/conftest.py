"""Fixtures: a real MariaDB server for the session, a fresh database per test on MariaDB
and SQLite, the local model server, a fake GitHub and the service. The harness they stand
on is ``tests/support/`` (``support.cli``: the repository's ``ROOT`` and the real CLI).

The tests are in three folders, each a marker too (``pytest -m unit``): ``unit`` (no
server: parsing, escaping, the sandbox, the shape of the code), ``integration`` (real
MariaDB, SQLite, PostgreSQL, Redis, an S3 stand-in, the model server, worker processes)
and ``acceptance`` (the CLI as subprocesses, the Action, the demo). `make test` runs all
of them."""

from __future__ import annotations

import gc
import itertools
import os
import shutil
from pathlib import Path

import pytest
from support.mariadb_server import HOW, LocalMariaDB, create_database, memory_folder, running
from support.migrated import migrated

_counter = itertools.count()


def pytest_collection_modifyitems(items):
    """Each test is marked with its folder: unit, integration or acceptance."""
    for item in items:
        folder = Path(str(item.fspath)).parent.name
        if folder in ("unit", "integration", "acceptance"):
            item.add_marker(folder)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    """The xdist controller rewrites the test modules' asserts once, before its workers start,
    so that they do not each do it again (support.rewrite_ahead: ~7 s of CPU a process)."""
    if session.config.pluginmanager.has_plugin("dsession"):
        from support.rewrite_ahead import rewrite_ahead

        rewrite_ahead(session.config)


def pytest_collection_finish(session):
    """What collection built (the modules, ~2,300 test items and their marks) lives to the
    end: frozen out of the cycle collector's full passes, 40-75 of them per test process in a
    full run (gc.callbacks: 11-23 s of CPU each process before, 11-12 s after)."""
    gc.collect()
    gc.freeze()
    # and the young generation collected every 10,000 allocations net, not 700: a test process
    # allocates far more than it keeps, and each young collection walked what the last kept
    # (gc.callbacks over test_service, test_sources and test_sequential in one process: 2,411
    # collections, 20 of them full, 3.3 s of CPU; now 475 with those of collection, 5 full, 2.05 s)
    gc.set_threshold(10_000, 10, 10)


@pytest.fixture(scope="session")
def mysql_server():
    """Yields (server_url, server or None). The server object allows restarts."""
    url = os.environ.get("PROMPTGATE_TEST_MYSQL_URL")
    if url:
        yield url, None
        return
    try:
        server = LocalMariaDB(durable=False, base=memory_folder())
    except RuntimeError:
        server = None
    if server is not None:
        with running(server):
            yield server.url(), server
        return
    try:
        from testcontainers.mysql import MySqlContainer

        container = MySqlContainer("mysql:8.4")
        container.start()
    except Exception as exc:  # no Docker either
        pytest.fail(f"no MySQL/MariaDB available for the tests: {HOW} ({exc})", pytrace=False)
    try:
        yield container.get_connection_url(), None
    finally:
        container.stop()


@pytest.fixture
def mysql_url(mysql_server, request):
    server_url, _ = mysql_server
    name = f"pg_test_{os.getpid()}_{next(_counter)}"
    return create_database(server_url, name)


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'gate.db'}"


@pytest.fixture(params=["mariadb", "sqlite"])
def db_url(request, tmp_path):
    """A fresh, empty database URL on each backend the store supports."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'gate.db'}"
    return request.getfixturevalue("mysql_url")


@pytest.fixture
def gate(db_url):
    """A Gate on ``db_url`` at the current schema version: the test process's migrated template
    copied in (support.migrated: ~0.07 s against ~0.3-0.9 s for the migrations on MariaDB);
    ``upgrade=True`` then finds nothing to do, and still checks."""
    from gate.domain import Gate

    g = Gate.connect(migrated(db_url), upgrade=True)
    yield g
    g.close()


@pytest.fixture
def mysql_gate(mysql_url):
    from gate.domain import Gate

    g = Gate.connect(migrated(mysql_url), upgrade=True)
    yield g
    g.close()


# --- the Action's tests: the local model server and a fake GitHub ----------------------------


@pytest.fixture(scope="module")
def llm():
    from gate.mockllm import MockLLMServer

    with MockLLMServer(latency_ms=1) as server:
        yield server


@pytest.fixture
def model(llm, monkeypatch):
    """The local model server as the default provider (OPENAI_BASE_URL)."""
    monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return llm


@pytest.fixture
def github():
    from support.action_harness import REPO, TOKEN
    from support.fake_github import FakeGitHub

    with FakeGitHub(REPO, token=TOKEN) as fake:
        yield fake


@pytest.fixture(scope="module")
def chromium() -> str:
    """Debian's headless Chromium (the status page's and the PR comment's browser tests)."""
    found = shutil.which("chromium") or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)
    if not found:
        pytest.fail("Debian's chromium is not installed: run `make server-binaries` (it installs it)", pytrace=False)
    return found


# --- the HTTP service -------------------------------------------------------------------------


@pytest.fixture
def service(mysql_url, tmp_path):
    """`promptgate serve` on a fresh MariaDB database at the current schema version
    (tests/support/service_harness.py)."""
    from support.service_harness import Service

    svc = Service(mysql_url, tmp_path)  # it copies the migrated template in (support.migrated)
    yield svc
    svc.stop()
