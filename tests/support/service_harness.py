"""The gate's HTTP service for the tests: `promptgate serve` as a real uvicorn process on a
free port (forked from the preloaded server of support.forkserver), with one token of each
scope, and a real HTTP client (httpx2) to call it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2

from support import forkserver
from support.cli import ROOT
from support.migrated import migrated

# One TLS context for every client of the harness: httpx2 builds one per client otherwise,
# loading the CA store each time (30 ms of CPU; the start-up poll below made one every
# 50 ms: 82 s of the suite's CPU), though the services here speak plain HTTP.
TLS = httpx2.create_ssl_context()

SCOPES = ("read", "submit", "admin", "feedback", "runtime")  # feedback, runtime: beside the nest
RUNTIME_PROMPTS = ["p1"]  # the harness's runtime token runs p1 only


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """A running `promptgate serve` on ``url``; ``tokens[scope]`` is a live token of each scope
    (``names[scope]`` its name).
    ``port``: the one to listen on (a service restarted where its clients expect it)."""

    def __init__(self, db_url: str, log_dir: Path, *args: str, env: dict | None = None, port: int | None = None):
        from gate.domain import Gate

        gate = Gate.connect(migrated(db_url), upgrade=True)  # an empty database: the template copied in
        try:
            suffix = f"{os.getpid()}-{time.monotonic_ns()}"
            self.names = {scope: f"test-{scope}-{suffix}" for scope in SCOPES}
            self.tokens = {
                scope: gate.create_token(self.names[scope], scope, RUNTIME_PROMPTS if scope == "runtime" else None)
                for scope in SCOPES
            }
        finally:
            gate.close()
        self.db_url, self.port = db_url, port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"serve-{self.port}.log"
        full_env = {**os.environ, "PROMPTGATE_DATABASE_URL": db_url, "PYTHONPATH": str(ROOT), **(env or {})}
        argv = ["serve", "--port", str(self.port), "--log-level", "warning", *args]
        with open(self.log_path, "wb") as log:
            if forkserver.wanted() and not forkserver.interpreter_env_differs(full_env):
                self.proc = forkserver.fork_server(ROOT).spawn(argv, full_env, ROOT, str(self.log_path))
            else:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "gate.cli", *argv],
                    env=full_env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=ROOT,
                )
        self._wait_up()

    def _wait_up(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        with httpx2.Client(verify=TLS, timeout=1) as poll:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"promptgate serve exited {self.proc.returncode}: {self.log()}")
                try:
                    if poll.get(self.url + "/healthz").status_code == 200:
                        return
                except httpx2.TransportError:
                    pass
                time.sleep(0.05)
        raise RuntimeError(f"promptgate serve did not answer in {timeout} s: {self.log()}")

    def client(self, scope: str | None = "admin", **kwargs) -> httpx2.Client:
        """A client sending the token of ``scope`` (None: no token)."""
        headers = {"Authorization": f"Bearer {self.tokens[scope]}"} if scope else {}
        kwargs.setdefault("verify", TLS)
        return httpx2.Client(base_url=self.url, headers=headers, timeout=kwargs.pop("timeout", 30), **kwargs)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
