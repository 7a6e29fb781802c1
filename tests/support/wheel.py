"""The wheel built from this tree and installed by pip, with its declared dependencies, into
a fresh virtual environment: what a user gets from ``pip install prompt-gate``, nothing of
the checkout (no editable install, no PYTHONPATH, another working directory).

Made once per test run (``tests/acceptance/conftest.py``: the xdist processes of a run
share it under a lock). Its cost was pip's byte-compiling of every dependency it installs
(sqlalchemy, pydantic, openai, ...: 20 of its 27 s of CPU) and ``ensurepip`` in the new
venv (4 s); the venv is made ``--without-pip`` and this interpreter's pip installs into
it (``--python``) ``--no-compile``: the same packages, resolved and installed the same way,
their bytecode written when a command first imports them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from support.cli import ROOT

SOURCES = ("pyproject.toml", "README.md", "LICENSE", "gate", "workers", "sql", "prompts-example")


def build_wheel(tmp: Path) -> Path:
    """The wheel of a copy of this tree (a build writes build/ and *.egg-info beside its
    sources: a copy keeps it off the checkout)."""
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


def install_into_fresh_venv(tmp: Path, wheel: Path) -> Path:
    """A new virtual environment (no system site-packages) with the wheel and the
    dependencies it declares installed by pip from the configured indexes; its folder."""
    venv, work = tmp / "venv", tmp / "elsewhere"
    work.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(Path.home())}
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120, cwd=work, env=env
    )
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-compile"]
        + [str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=work,
        env=env,
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return venv
