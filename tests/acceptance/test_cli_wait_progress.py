"""`promptgate wait` shows its progress on stderr while a real run goes on (MariaDB, a
worker process, the local model server answering with some latency): plain lines when
stderr is a pipe (a CI log), a block redrawn in place when it is a pseudo-terminal; stdout
is exactly what `wait --no-progress` prints."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading
import time

from support.cli import ROOT, run_cli
from support.helpers import rules_spec, write_rule_rows
from support.workers_harness import WorkerFleet, worker_env

from gate.mockllm import MockLLMServer

CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # anything but the newline
ROWS = 200


def wait_cli(url, uid, *args, stderr):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "gate.cli", "--database-url", url, "wait", str(uid), "--timeout", "60", *args],
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=env,
        cwd=ROOT,
    )


def pseudo_terminal(columns=120):
    """(master, slave) of a pseudo-terminal of ``columns`` columns, and a thread collecting
    what is written to it."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    seen = bytearray()

    def read():
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every writer closed the terminal
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return master, slave, seen, reader


def test_wait_progress_on_a_pipe_and_on_a_terminal(mysql_gate, tmp_path):
    gate, url = mysql_gate, mysql_gate.settings.database_url
    for name, wrong_every in (("hard", 10), ("easy", 0)):  # the rules score 90 % and 100 %
        gate.register_dataset(name, str(write_rule_rows(tmp_path / f"{name}.csv", ROWS, wrong_every)))
        gate.map_dataset("p1", name, "0.5")
    uid = gate.submit(rules_spec("p1"), "check")

    master, slave, on_terminal, reader = pseudo_terminal()
    started = time.monotonic()
    piped = wait_cli(url, uid, "--json", stderr=subprocess.PIPE)
    termed = wait_cli(url, uid, stderr=slave)
    os.close(slave)
    with MockLLMServer(latency_ms=20) as llm:  # 400 calls, 4 at a time: ~2 s of scoring
        fleet = WorkerFleet(worker_env(url, llm.base_url, concurrency=4, chunk_size=16), tmp_path)
        fleet.start(1)
        try:
            json_out, plain = (s.decode() for s in piped.communicate(timeout=60))
            text_out = termed.communicate(timeout=60)[0].decode()
        finally:
            fleet.stop_all()
    elapsed = time.monotonic() - started
    reader.join(10)
    os.close(master)
    assert (piped.returncode, termed.returncode) == (0, 0), plain + fleet.logs()

    # stdout is the report alone, as without progress
    quiet_json = run_cli("--database-url", url, "wait", uid, "--json", "--no-progress")
    quiet_text = run_cli("--database-url", url, "wait", uid, "--no-progress")
    assert (quiet_json.stdout, quiet_json.stderr) == (json_out, "")
    assert (quiet_text.stdout, quiet_text.stderr) == (text_out, "")

    # a pipe: plain lines, the final figures last, at most one line per dataset every 10 s
    assert not CONTROL.search(plain), plain
    lines = plain.splitlines()
    assert lines[0] in (f"update {uid} p1: PENDING", f"update {uid} p1: RUNNING"), plain
    assert lines[-3] == f"update {uid} p1: PASSED" and sorted(lines[-2:]) == [
        f"update {uid} easy: {ROWS}/{ROWS} scored, accuracy 100.0%, done",
        f"update {uid} hard: {ROWS}/{ROWS} scored, accuracy 90.0%, done",
    ], plain
    for name in ("hard", "easy"):
        shown = [line for line in lines if line.startswith(f"update {uid} {name}: ")]
        assert 2 <= len(shown) <= 2 + elapsed // 10, plain  # one while running, the final one
        assert re.fullmatch(
            rf"update {uid} {name}: (preparing items|\d+/{ROWS} scored, accuracy so far "
            r"(--|\d+\.\d%), ETA (--|\d+:\d\d))",
            shown[0],
        ), plain

    # a terminal: the block is redrawn in place, with an ETA once items were scored
    drawn = on_terminal.decode()
    assert len(re.findall(r"\x1b\[3A\r\x1b\[J", drawn)) >= 3, drawn  # up over the 3 lines, clear, draw again
    # (which dataset is caught part-way depends on the redraws' timing: under load one can go
    # from 0 to done between two of them)
    assert re.search(rf"  (hard|easy)  \d+/{ROWS} scored  accuracy so far \d+\.\d%  ETA \d+:\d\d\r\n", drawn), drawn
    status, *datasets = drawn.rsplit("\x1b[3A\r\x1b[J", 1)[1].removesuffix("\r\n").split("\r\n")
    assert status == f"update {uid} p1: PASSED" and sorted(datasets) == [
        f"  easy  {ROWS}/{ROWS} scored  accuracy 100.0%  done",
        f"  hard  {ROWS}/{ROWS} scored  accuracy 90.0%  done",
    ], drawn
