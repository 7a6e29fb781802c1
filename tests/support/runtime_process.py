"""A production process for the tests: a real ``PromptRuntime`` in its own process, on the
gate's database or through its service, calling the live prompt on production-like traffic
and sending feedback, as an application would. Started by ``RuntimeFleet``; its statistics
(calls per version, the canary's share, keys that met two versions within one rollout,
errors, feedback sent) are written as JSON to a file every half second and at exit
(SIGTERM: the buffered feedback is flushed first).

    python -m support.runtime_process CONFIG.json"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from support.cli import ROOT


def write_stats(path: str, stats: dict) -> None:
    tmp = f"{path}.tmp"
    Path(tmp).write_text(json.dumps(stats))
    os.replace(tmp, path)


def runtime_of(config: dict):
    from gate.runtime import PromptRuntime

    if config.get("from_env"):  # as production is configured: the gate named by the environment alone
        return PromptRuntime(ttl=config["ttl"])
    if config.get("gate_url"):
        tokens = {"token": config["token"], "feedback_token": config.get("feedback_token")}
        return PromptRuntime(gate_url=config["gate_url"], ttl=config["ttl"], **tokens)
    return PromptRuntime(config["db_url"], ttl=config["ttl"])


def feedback_only(config: dict) -> None:
    """Production's feedback alone, at ``rate`` events a second for ``events`` events: each
    a call of the rollout in progress, as ``decide`` would have returned it (the model call
    is not what is measured here), sent through ``PromptRuntime.feedback``."""
    from gate.calls.llm import CallResult
    from gate.production.result import served_result
    from gate.production.versions import route

    begun = time.monotonic()
    rt = runtime_of(config)
    loaded = rt.load(config["prompt"])
    call = CallResult("yes", True, "yes", 1)
    started, total = time.monotonic(), config["events"]
    loaded_after = started - begun
    for i in range(total):
        version, arm = route(loaded, f"user-{i}")
        key = loaded.canary.call_key if loaded.canary else None  # a runtime token's load: ids that verify
        call_id = rt._call_ids.mint(key, loaded.rollout_id(), version.version) if key else None
        result = served_result(call, config["prompt"], version.version, loaded.rollout_id(), arm, None, call_id)
        rt.feedback(result, i % 10 != 0)
        behind = started + (i + 1) / config["rate"] - time.monotonic()
        if behind > 0:
            time.sleep(behind)
    offered = time.monotonic() - started
    flushed = rt.close(timeout=60)
    closing = time.monotonic() - started - offered
    buf = rt.feedback_buffer
    feedback = {"sent": buf.sent, "dropped": buf.dropped, "refused": buf.refused, "flushed": flushed}
    stats = {"pid": os.getpid(), "events": total, "offered_seconds": offered, "close_seconds": closing}
    stats.update(feedback=feedback, done=True, loaded_after=loaded_after)
    write_stats(config["stats"], stats)


def run(config: dict) -> None:
    if config.get("events"):
        feedback_only(config)
        return
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    rt = runtime_of(config)
    stats = {"pid": os.getpid(), "calls": 0, "errors": 0, "by_version": {}, "by_arm": {}, "sticky_violations": 0}
    arms: dict[tuple[int, str], str] = {}  # (rollout, key) -> arm
    items, keys, rate = config["items"], config["keys"], config.get("rate", 0)
    deadline = time.monotonic() + config.get("duration", 3600)
    last_write, i = 0.0, 0
    while not stop.is_set() and time.monotonic() < deadline:
        item = items[i % len(items)]
        key = f"user-{(i * 7919) % keys}"
        i += 1
        try:
            result = rt.decide(config["prompt"], {"text": item["text"]}, key=key)
        except Exception as exc:  # the statistics say so; the loop goes on as production would
            stats["errors"] += 1
            stats["last_error"] = str(exc)[:300]
            time.sleep(0.05)
            continue
        stats["calls"] += 1
        stats["by_version"][str(result.version)] = stats["by_version"].get(str(result.version), 0) + 1
        if result.rollout_id is not None:
            arm_key = f"{result.rollout_id}:{result.arm}"
            stats["by_arm"][arm_key] = stats["by_arm"].get(arm_key, 0) + 1
            seen = arms.setdefault((result.rollout_id, key), result.arm)
            stats["sticky_violations"] += int(seen != result.arm)
            stats.setdefault("arms", {}).setdefault(str(result.rollout_id), {})[key] = result.arm
            if config.get("feedback", True):
                rt.feedback(result, correct=result.decision == item["expected"])
        if rate:
            time.sleep(1.0 / rate)
        if time.monotonic() - last_write > 0.5:
            last_write = time.monotonic()
            write_stats(config["stats"], {**stats, "feedback_pending": rt.feedback_buffer.pending()})
    flushed = rt.close(timeout=20)
    buf = rt.feedback_buffer
    stats["feedback"] = {"sent": buf.sent, "dropped": buf.dropped, "refused": buf.refused, "flushed": flushed}
    stats["sqlalchemy_loaded"] = "sqlalchemy" in sys.modules
    stats["target"] = rt.target.reason
    stats["done"] = True
    write_stats(config["stats"], stats)


# what a runtime process imports before its first call, through the service (no SQLAlchemy: the
# processes' statistics say whether one loaded it) — its fork server imports these once (~0.9 s
# of CPU a process); one on the database imports its driver after the fork, as it would anyway
PRELOAD = ("support.runtime_process", "gate.runtime", "gate.calls.llm", "gate.production.result", "httpx2")

STARTED = itertools.count()  # every process of every fleet its own files in a shared folder


class RuntimeFleet:
    """Start and stop production processes (``support.runtime_process``)."""

    def __init__(self, folder: Path, env: dict):
        self.folder, self.env = folder, env
        self.procs: list[tuple[subprocess.Popen, Path]] = []
        self.logs: list[Path] = []

    def start(self, **config) -> int:
        n, number = len(self.procs), next(STARTED)
        stats = self.folder / f"runtime-{number}.json"
        cfg = self.folder / f"runtime-{number}.config.json"
        cfg.write_text(json.dumps({**config, "stats": str(stats)}))
        self.logs.append(self.folder / f"runtime-{number}.log")
        env = {**os.environ, **self.env, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
        self.procs.append((self._spawn(cfg, env, self.logs[-1]), stats))
        return n

    @staticmethod
    def _spawn(cfg: Path, env: dict, log: Path):
        """``python -m support.runtime_process CFG``: forked from a server that has imported
        its modules (support.forkserver), or a fresh interpreter when PROMPTGATE_TEST_FORK=0
        or the interpreter's own variables differ."""
        from support import forkserver

        if forkserver.wanted() and not forkserver.interpreter_env_differs(env):
            server = forkserver.fork_server(ROOT, PRELOAD)
            return server.spawn([str(cfg)], env, ROOT, str(log), module="support.runtime_process")
        with open(log, "wb") as out:
            argv = [sys.executable, "-m", "support.runtime_process", str(cfg)]
            return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)

    def stats(self, n: int) -> dict:
        path = self.procs[n][1]
        return json.loads(path.read_text()) if path.exists() else {}

    def stop(self, n: int, timeout: float = 30) -> dict:
        proc, _ = self.procs[n]
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout)
        return self.stats(n)

    def finish(self, n: int, timeout: float = 120) -> dict:
        """Wait for process ``n`` to end on its own (feedback-only runs end when sent)."""
        self.procs[n][0].wait(timeout)
        return self.stats(n)

    def stop_all(self) -> list[dict]:
        return [self.stop(n) for n in range(len(self.procs))]

    def kill_all(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def log(self, n: int) -> str:
        return self.logs[n].read_text(errors="replace")[-3000:]


if __name__ == "__main__":
    run(json.loads(Path(sys.argv[1]).read_text()))
