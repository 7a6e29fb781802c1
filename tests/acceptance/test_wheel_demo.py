"""`pip install` then `promptgate demo` in an empty folder (issue 50.3): the wheel built from
this tree, installed into a fresh virtual environment, runs the demo from the examples it
ships (``gate/example``), not from a checkout. It failed twice before: the examples were
read through ``importlib.resources.files`` of a folder without ``__init__`` (a
``MultiplexedPath``, whose ``str()`` is no path), and ``gate.kinds`` was missing from the
wheel's package list.

The environment is the test's own dependencies (a ``.pth`` line naming their folder, so
nothing is downloaded and no ``.pth`` hook of theirs runs: the checkout's editable install
stays out) with the wheel installed over them ``--no-deps``: seconds, not minutes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from support.cli import ROOT

SOURCES = ("pyproject.toml", "README.md", "LICENSE", "gate", "workers", "sql", "prompts-example")


def build_wheel(tmp: Path) -> Path:
    """The wheel of a copy of this tree (a build writes build/ and *.egg-info beside its
    sources: a copy keeps it off the checkout and off another test's build)."""
    src = tmp / "src"
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(path, src / name)
    out = tmp / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = out.glob("prompt_gate-*.whl")
    return wheel


def fresh_venv(tmp: Path, wheel: Path) -> Path:
    """A new virtual environment with the wheel installed and this interpreter's
    dependencies visible; its folder."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--no-compile",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return venv


def test_the_installed_wheels_demo_runs_in_an_empty_folder(tmp_path):
    wheel = build_wheel(tmp_path)
    venv = fresh_venv(tmp_path, wheel)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PROMPTGATE_", "OPENAI_"))}
    result = subprocess.run(
        [str(venv / "bin" / "promptgate"), "demo"], capture_output=True, text=True, cwd=empty, env=env, timeout=180
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    (synced,) = [line for line in lines if line.startswith("synced ")]
    assert f"{venv}/lib/" in synced and "/site-packages/gate/example/gate.yaml" in synced, synced
    (summary,) = [line for line in lines if line.startswith("result: ")]
    assert summary.startswith("result: 4 changes REJECTED, 1 APPLIED — ") and "As expected." in summary, summary
    assert not list(empty.iterdir())  # nothing left behind in the folder it ran in
