"""Real worker processes for the tests: `promptgate worker` as processes of their own, forked
from a server that has imported their modules once (support.forkserver: ~1.1 s of CPU a worker
saved), or started as `python -m gate.cli` subprocesses when PROMPTGATE_TEST_FORK=0
or the command starts processes of its own (``--processes``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support import forkserver
from support.cli import ROOT


def worker_env(db_url: str, base_url: str, **settings) -> dict:
    env = {
        **os.environ,
        "PROMPTGATE_DATABASE_URL": db_url,
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "test-key",
        "PYTHONPATH": str(ROOT),
        "PROMPTGATE_POLL_INTERVAL": "0.05",
        "PROMPTGATE_POLL_MAX_INTERVAL": "0.2",
    }
    env.update({f"PROMPTGATE_{k.upper()}": str(v) for k, v in settings.items()})
    return env


class WorkerFleet:
    """Start, kill and restart `promptgate worker` processes."""

    def __init__(self, env: dict, log_dir: Path, args=("--role", "all")):
        self.env, self.log_dir, self.args = env, log_dir, list(args)
        self.procs: list[subprocess.Popen] = []
        self.started = 0

    def start(self, n: int = 1) -> list[subprocess.Popen]:
        new = []
        forked = forkserver.wanted() and "--processes" not in self.args
        for _ in range(n):
            self.started += 1
            log = open(self.log_dir / f"worker-{self.started}.log", "wb")
            argv = ["-v", "worker", *self.args]
            if forked:
                log.close()
                proc = forkserver.fork_server(ROOT).spawn(argv, self.env, ROOT, log.name)
            else:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "gate.cli", *argv],
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=ROOT,
                )
            proc.log_path = log.name
            proc.started_at = time.monotonic()
            self.procs.append(proc)
            new.append(proc)
        return new

    def kill(self, proc: subprocess.Popen, sig=signal.SIGKILL) -> None:
        proc.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            proc.wait(30)
            self.procs.remove(proc)

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        deadline = time.monotonic() + 30
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.log_dir.glob("worker-*.log")))
