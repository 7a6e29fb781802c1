"""README's five-minute start is true: its block of `promptgate` commands, run as written in
an empty folder holding the example prompts (only the local model server's port changed to a
free one), applies the candidate: `wait` exits 0, the gate's state is `promptgate.db` in that
folder, and `live` shows the version it applied."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from support.cli import ROOT

README = ROOT / "README.md"
WRAPPER = "set -e\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n"


def five_minute_block(text: str) -> str:
    """The README block of the five-minute start that runs the gate (the one with `submit`)."""
    start = text.index("## Five minutes")
    section = text[start : text.index("\n## ", start + 1)]
    (block,) = [b for b in re.findall(r"```sh\n(.*?)```", section, re.S) if "promptgate submit" in b]
    return block


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_five_minute_start_applies_the_candidate(tmp_path):
    block = five_minute_block(README.read_text(encoding="utf-8"))
    assert "--port 8000" in block and "127.0.0.1:8000" in block, block
    (tmp_path / "prompts-example").symlink_to(ROOT / "prompts-example")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROMPTGATE_", "OPENAI_"))}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    script = WRAPPER + block.replace("8000", str(free_port()))
    proc = subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    assert "ticket-urgency: APPLIED" in err + out, err[-3000:]
    assert (tmp_path / "promptgate.db").is_file()
    assert re.search(r"^ticket-urgency v1 — applied by update #1", out, re.M), out[-3000:]
