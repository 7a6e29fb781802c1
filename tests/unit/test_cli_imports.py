"""A CLI that starts at once (issue 25, P9): what a `promptgate` process imports.

Each command runs as a real process (`python -X importtime -m gate.cli ...`, the modules
it loaded read from the import log): a command that talks to the service (``--gate-url``)
loads neither SQLAlchemy nor the service, the store or the workers, nor the HTTP server's
stack; `--version` and `--help` load nothing they do not print (no httpx either). The
service here is a closed port: each command fails in one line, after loading all it
needs to ask."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from support.cli import ROOT

DATABASE_SIDE = ("sqlalchemy", "pymysql", "gate.domain", "gate.store", "gate.db", "gate.datasets.importer", "workers")
SERVER_SIDE = ("fastapi", "starlette", "uvicorn", "pydantic", "gate.service", "http.server")
# PyGithub: the Action's phases only; httpx2/httpcore2: the HTTP client is the standard library's
FOR_A_SERVICE_COMMAND = DATABASE_SIDE + SERVER_SIDE + ("github", "httpx2", "httpcore2", "anyio", "certifi")
FOR_VERSION_AND_HELP = FOR_A_SERVICE_COMMAND + (
    "gate.client.remote",
    "gate.client.transport",
    "http.client",
    "jinja2",
    "yaml",
    "re2",
    "gate.prompt.spec",
    "gate.records",
)
SHA = "0123456789abcdef0123456789abcdef01234567"
PROMPT = str(ROOT / "prompts-example" / "prompts" / "ticket-urgency.yaml")
GATE_CONFIG = str(ROOT / "prompts-example" / "gate.yaml")
DATASET = str(ROOT / "prompts-example" / "datasets" / "urgency-regression.csv")
SERVICE_COMMANDS = [
    ["status", "1"],
    ["wait", "1", "--timeout", "1"],
    ["wait", "--sha", SHA, "--timeout", "0"],
    ["submit", PROMPT],
    ["cancel", "1"],
    ["live", "p"],
    ["history", "p"],
    ["dataset", "list"],
    ["dataset", "versions", "d"],
    ["dataset", "preview", "d"],
    ["dataset", "diff", "d", "v1", "v2"],
    ["dataset", "add", "d", "--source", DATASET],
    ["dataset", "refresh", "d"],
    ["dataset", "map", "p", "d", "--min-accuracy", "0.9"],
    ["dataset", "unmap", "p", "d"],
    ["rollback", "p", "--reason", "r"],
    ["report", "1"],
    ["workers"],
    ["prices"],
    ["sync", GATE_CONFIG, "--dry-run"],
]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(*args: str, **env: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """The command's process and the modules it imported."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PROMPTGATE_")}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gate.cli", *args],
        cwd=ROOT,
        timeout=120,
        capture_output=True,
        text=True,
        env={**clean, "PROMPTGATE_TOKEN": "t0ken", **env},
    )
    loaded = {line.rpartition("|")[2].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    return proc, loaded


def forbidden(loaded: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == p or m.startswith(p + ".") for p in prefixes))


def errors_of(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if not line.startswith("import time:")]


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["dataset", "--help"], ["status", "--help"]], ids=" ".join)
def test_version_and_help_load_only_what_they_print(args):
    proc, loaded = run_cli(*args)
    assert proc.returncode == 0, errors_of(proc)
    assert "promptgate" in proc.stdout or "Usage:" in proc.stdout
    assert "gate.cli" in loaded and "click" in loaded  # (the log was read)
    assert forbidden(loaded, FOR_VERSION_AND_HELP) == []


@pytest.mark.parametrize("args", SERVICE_COMMANDS, ids=" ".join)
def test_a_service_command_loads_neither_the_database_nor_the_service(args):
    url = f"http://127.0.0.1:{closed_port()}"
    proc, loaded = run_cli("--gate-url", url, *args)
    assert proc.returncode == 2, (proc.stdout, errors_of(proc))
    assert errors_of(proc) == [f"error: cannot reach the gate at {url}: [Errno 111] Connection refused"]
    assert "gate.client.remote" in loaded and "gate.client.transport" in loaded  # it went through the service's client
    assert forbidden(loaded, FOR_A_SERVICE_COMMAND) == []


def test_the_url_from_the_environment_is_the_same_light_path():
    url = f"http://127.0.0.1:{closed_port()}"
    proc, loaded = run_cli("status", "7", PROMPTGATE_URL=url)
    assert proc.returncode == 2 and "cannot reach the gate" in proc.stderr
    assert forbidden(loaded, FOR_A_SERVICE_COMMAND) == []


def test_the_database_path_still_loads_the_database(tmp_path):
    proc, loaded = run_cli("--database-url", f"sqlite:///{tmp_path / 'g.db'}", "status", "1")
    assert proc.returncode == 2 and errors_of(proc)[-1] == "error: unknown update 1", errors_of(proc)
    assert {"sqlalchemy", "gate.domain", "gate.store"} <= loaded
    assert forbidden(loaded, ("httpx2", "gate.client.remote")) == []


# a command on the database never loads the HTTP server's stack, the model's SDK, the workers or
# the service's client; `status` and `wait` read no prompt, so not its parser either (Jinja2,
# YAML: ~55 ms of a command's ~0.4 s, issue 40)
FOR_A_DATABASE_COMMAND = SERVER_SIDE + ("openai", "gate.calls.llm", "github", "httpx2", "gate.client", "workers")
PROMPT_PARSER = ("jinja2", "yaml", "gate.prompt.spec", "gate.prompt.templating", "gate.domain.admission")


@pytest.mark.parametrize("args", [["status", "1"], ["wait", "1", "--timeout", "0"]], ids=" ".join)
def test_status_and_wait_on_the_database_load_no_prompt_parser(args, tmp_path):
    proc, loaded = run_cli("--database-url", f"sqlite:///{tmp_path / 'g.db'}", *args)
    assert proc.returncode == 2 and errors_of(proc)[-1] == "error: unknown update 1", errors_of(proc)
    assert {"sqlalchemy", "gate.domain", "gate.store.updates", "gate.report.update"} <= loaded
    assert forbidden(loaded, FOR_A_DATABASE_COMMAND + PROMPT_PARSER) == []


def test_submit_on_the_database_loads_the_prompt_parser_and_no_server(tmp_path):
    proc, loaded = run_cli("--database-url", f"sqlite:///{tmp_path / 'g.db'}", "submit", PROMPT)
    assert proc.returncode == 2 and "has no mapped dataset" in errors_of(proc)[-1], errors_of(proc)
    assert {"gate.prompt.spec", "gate.domain.admission", "sqlalchemy"} <= loaded
    assert forbidden(loaded, FOR_A_DATABASE_COMMAND) == []


def test_the_client_knows_every_public_name_of_gate():
    """``RemoteGate`` refuses a database-only method in one line by these names, without
    importing ``Gate``: they must stay Gate's public names."""
    from gate.client.remote import GATE_NAMES
    from gate.domain import Gate

    assert GATE_NAMES == {name for name in dir(Gate) if not name.startswith("_")}


def test_an_http_gate_never_loads_the_ca_store(monkeypatch):
    """Loading the CA store is ~0.1 s of a command: a gate reached over plain HTTP, with no
    proxy, never builds a TLS context (an https:// gate does, on its first request)."""
    from gate.client.transport import Transport, TransportError

    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    transport = Transport(f"http://127.0.0.1:{closed_port()}", {})
    with pytest.raises(TransportError):
        transport.request("GET", "/healthz")
    assert transport._context is None and transport.proxy is None


@pytest.mark.parametrize("roles", [("materialize",), ("finalize",), ("reconcile",), ("finalize", "reconcile")])
def test_a_worker_that_calls_no_model_loads_no_model_client(roles):
    """Only the execute role calls the model: a process of the other roles (each spawned
    worker process imports its roles anew) does not load the openai SDK (0.6 s of CPU:
    its pydantic types) nor gate.calls.llm."""
    modules = ", ".join(["workers.supervisor", *(f"workers.{role}" for role in roles)])
    code = f"import sys, {modules}; print(sorted(m for m in ('openai', 'gate.calls.llm') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
