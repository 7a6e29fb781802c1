"""The repository's root, and the real `promptgate` CLI run as a subprocess from it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args, env=None, input=None, timeout=120, cwd=None):
    """Run the real `promptgate` CLI as a subprocess."""
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), full_env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "gate.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=full_env,
        input=input,
        timeout=timeout,
        cwd=cwd or ROOT,
    )
