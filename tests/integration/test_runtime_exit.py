"""Feedback is never lost quietly (issue 46, point 9): a process that buffered feedback and
exits without ``close()`` still sends it (an ``atexit`` hook, bounded); a forked child's
buffer starts empty, with a lock of its own and no dead thread, and sends what the child
gives it; a gate that is down at exit costs the process at most the bounded wait, and the
log says how many events were not sent.

Each case is a real ``python -c`` process with a real ``PromptRuntime``, on the gate's
service (``promptgate serve`` on MariaDB) with a canary rollout that takes feedback, as
tests/integration/test_feedback.py sets it up."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest
from support.canary import gate_config, prompt_spec
from support.cli import ROOT
from support.service_harness import free_port

from gate import gateconfig
from gate.mockllm import MockLLMServer
from gate.store.feedback import count_feedback
from workers.supervisor import run_until_terminal

ROLLOUT = {"canary_percent": 10, "min_feedback": 10_000_000, "max_drop": 0.02, "confidence": 0.95, "max_hours": 1}

PRELUDE = """
import json, os, sys, threading, time
from gate.calls.llm import CallResult
from gate.runtime import PromptRuntime
from gate.production.result import served_result
from gate.production.versions import route

CALL = CallResult("yes", True, "yes", 1)


def send(rt, loaded, prefix, n):
    key = loaded.canary.call_key if loaded.canary else None  # a runtime token's load (issue 48)
    for i in range(n):
        version, arm = route(loaded, f"{prefix}-{i}")
        call_id = rt._call_ids.mint(key, loaded.rollout_id(), version.version) if key else None
        result = served_result(CALL, "p1", version.version, loaded.rollout_id(), arm, None, call_id)
        assert rt.feedback(result, i % 10 != 0)
"""

# 4,000 events offered as fast as the loop goes, then the end of the script: no close().
EXIT_WITHOUT_CLOSE = (
    PRELUDE
    + """
if len(sys.argv) > 2:  # through the service
    url, read, feedback = sys.argv[1:4]
    rt = PromptRuntime(gate_url=url, token=read, feedback_token=feedback, ttl=30)
else:  # on the database
    rt = PromptRuntime(sys.argv[1], ttl=30)
loaded = rt.load("p1")
send(rt, loaded, "user", 4000)
print("offered", flush=True)
"""
)

# The parent holds 100 events in its queue (fewer than a batch, a flush an hour away) and
# another thread of it holds the buffer's lock when it forks: the child must start empty,
# with a lock it can take and a thread of its own.
FORKED = (
    PRELUDE
    + """
url, read, feedback = sys.argv[1:4]
rt = PromptRuntime(gate_url=url, token=read, feedback_token=feedback, ttl=30, report=False)
loaded = rt.load("p1")
buf = rt.feedback_buffer
buf.flush_seconds = 3600
send(rt, loaded, "parent", 100)
held, release = threading.Event(), threading.Event()

def hold():
    with buf.lock:
        held.set()
        release.wait()

holder = threading.Thread(target=hold, daemon=True)
holder.start()
held.wait()
pid = os.fork()
if pid == 0:
    code = 1
    try:
        child = {"pending_at_start": buf.pending()}
        send(rt, loaded, "child", 50)
        child["flushed"] = rt.close(timeout=20)
        child.update(sent=buf.sent, dropped=buf.dropped, refused=buf.refused)
        print("child", json.dumps(child), flush=True)
        code = 0
    finally:
        os._exit(code)
release.set()
deadline = time.monotonic() + 30
while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    if time.monotonic() > deadline:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print("child hung", flush=True)
        status = -1
        break
    time.sleep(0.05)
flushed = rt.close(timeout=20)
print("parent", json.dumps({"child_status": status, "flushed": flushed, "sent": buf.sent}), flush=True)
"""
)

# The parent has loaded p1 and reported it; a thread of it holds the runtime's lock (as its
# reporter does during a refresh) when it forks. The child loads p1 anew (taking that lock)
# and reports what it serves as its own process.
FORKED_RUNTIME = (
    PRELUDE
    + """
if len(sys.argv) > 2:  # through the service
    rt = PromptRuntime(gate_url=sys.argv[1], token=sys.argv[2], ttl=30)
else:  # on the database
    rt = PromptRuntime(sys.argv[1], ttl=30)
rt.load("p1")


def reported(within):
    deadline = time.monotonic() + within
    while rt.reporter.sent < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    return rt.reporter.sent


reported(20)
held, release = threading.Event(), threading.Event()


def hold():
    with rt._lock:
        held.set()
        release.wait()


threading.Thread(target=hold, daemon=True).start()
held.wait()
pid = os.fork()
if pid == 0:
    code = 1
    try:
        rt.invalidate("p1")
        loaded = rt.load("p1")
        child = {"pid": os.getpid(), "version": loaded.version, "reported": reported(20)}
        print("child", json.dumps({**child, "process_id": rt.process_id}), flush=True)
        code = 0
    finally:
        os._exit(code)
release.set()
deadline = time.monotonic() + 30
while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    if time.monotonic() > deadline:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print("child hung", flush=True)
        status = -1
        break
    time.sleep(0.05)
print("parent", json.dumps({"pid": os.getpid(), "process_id": rt.process_id, "child_status": status}), flush=True)
rt.close()
"""
)

# Feedback for a gate that is not there (refused, or a socket that never answers), then the
# end of the script. ``argv[2]``: the runtime's flush_at_exit ("" for its default).
GATE_DOWN = (
    PRELUDE
    + """
url, wait = sys.argv[1], sys.argv[2]
options = {"flush_at_exit": float(wait)} if wait else {}
rt = PromptRuntime(gate_url=url, token="t0ken", report=False, **options)
for i in range(1000):
    rt.feedback(served_result(CALL, "p1", 2, 7, "canary"), True)
print("exiting", flush=True)
"""
)


def python(script: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", script, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def start_canary(gate, tmp_path, monkeypatch) -> int:
    """p1 v2 in a canary rollout beside stable v1 that no feedback here can decide."""
    with MockLLMServer(latency_ms=0) as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        gateconfig.sync(gate, gate_config(tmp_path, ROLLOUT))
        run_until_terminal(gate, [gate.submit(prompt_spec("v1"), "apply")])
        second = gate.submit(prompt_spec("v2"), "apply")
        run_until_terminal(gate, [second])
    return gate.rollout_of_update(second)["id"]


@pytest.fixture
def canary(mysql_gate, tmp_path, monkeypatch):
    return start_canary(mysql_gate, tmp_path, monkeypatch)


def stored(gate, rollout_id: int) -> int:
    with gate.engine.connect() as conn:
        return count_feedback(conn, rollout_id)


@pytest.mark.parametrize("through", ["service", "database"])
def test_a_process_that_exits_without_close_sends_all_4000_events(mysql_gate, mysql_url, canary, request, through):
    if through == "service":
        service = request.getfixturevalue("service")
        args = [service.url, service.tokens["runtime"], service.tokens["runtime"]]
    else:
        args = [mysql_url]
    proc = python(EXIT_WITHOUT_CLOSE, *args)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "offered" in out, err
    assert stored(mysql_gate, canary) == 4000, err
    assert "not sent" not in err, err


def test_a_forked_childs_buffer_starts_empty_and_sends_its_own_events(mysql_gate, service, canary):
    proc = python(FORKED, service.url, service.tokens["runtime"], service.tokens["runtime"])
    out, err = proc.communicate(timeout=120)
    said = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in out.splitlines() if " " in line}
    assert "child hung" not in out, f"the child blocked on its buffer (a lock held at fork?)\n{out}\n{err}"
    child, parent = json.loads(said["child"]), json.loads(said["parent"])
    assert child == {"pending_at_start": 0, "flushed": True, "sent": 50, "dropped": 0, "refused": 0}, (out, err)
    assert parent == {"child_status": 0, "flushed": True, "sent": 100}, (out, err)
    assert stored(mysql_gate, canary) == 150  # the parent's 100 once (by the parent), the child's 50


@pytest.mark.parametrize("through", ["service", "database"])
def test_a_forked_childs_runtime_takes_its_own_lock_and_reports_as_its_own_process(
    mysql_gate, mysql_url, canary, request, through
):
    if through == "service":
        service = request.getfixturevalue("service")
        args = [service.url, service.tokens["runtime"]]  # counted: it may run p1 (issue 48)
    else:
        args = [mysql_url]
    proc = python(FORKED_RUNTIME, *args)
    out, err = proc.communicate(timeout=120)
    assert "child hung" not in out, f"the child blocked on the runtime (a lock held at fork?)\n{out}\n{err}"
    said = {line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1]) for line in out.splitlines() if " " in line}
    child, parent = said["child"], said["parent"]
    assert parent["child_status"] == 0 and child["version"] in (1, 2) and child["reported"] >= 1, (out, err)
    assert child["process_id"] != parent["process_id"]
    processes = {(p.process_id, p.pid) for p in mysql_gate.served("p1")["processes"]}
    assert {(child["process_id"], child["pid"]), (parent["process_id"], parent["pid"])} <= processes, processes


class Silent:
    """A gate that accepts connections and never answers (its backlog takes them)."""

    def __enter__(self) -> str:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(100)
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __exit__(self, *exc) -> None:
        self.sock.close()


class Refused:
    """Nothing listening: every connection refused."""

    def __enter__(self) -> str:
        return f"http://127.0.0.1:{free_port()}"

    def __exit__(self, *exc) -> None:
        pass


@pytest.mark.parametrize(
    ("gate", "wait", "bound"),
    [(Refused, "", 5.0), (Silent, "1.5", 1.5)],
    ids=["refused-default-wait", "silent-configured-wait"],
)
def test_a_gate_down_at_exit_costs_the_bounded_wait_and_the_log_counts_what_was_not_sent(gate, wait, bound):
    with gate() as url:
        proc = python(GATE_DOWN, url, wait)
        assert proc.stdout.readline().strip() == "exiting", proc.stderr.read()
        began = time.monotonic()
        proc.wait(timeout=bound + 30)
        took = time.monotonic() - began
        err = proc.stderr.read()
    assert proc.returncode == 0, err
    assert "1000 feedback events not sent" in err, err
    assert bound * 0.8 <= took < bound + 4.0, (took, err)  # it tried for the wait, and no longer
