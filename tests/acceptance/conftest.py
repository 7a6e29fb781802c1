"""The acceptance tests' shared fixture: the wheel of this tree installed into a fresh
virtual environment, once per test run."""

from __future__ import annotations

import fcntl
import shutil
from pathlib import Path

import pytest
from support.wheel import build_wheel, install_into_fresh_venv


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory, request) -> Path:
    """The folder of a fresh virtual environment with the wheel built from this tree and its
    declared dependencies installed by pip (``support.wheel``). The xdist processes of one
    run share it: each has its own session, so the first to ask builds it in the run's
    common temporary folder under a file lock and the others wait for it and reuse it; a
    failed build is recorded there, so each process fails with its message instead of
    building again."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if hasattr(request.config, "workerinput") else base
    home = shared / "installed-wheel"
    with open(shared / "installed-wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready, failed = home / "ready", home / "failed"
        if failed.exists():
            pytest.fail(f"the wheel's install failed in another test process:\n{failed.read_text()}")
        if not ready.exists():
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir()
            try:
                install_into_fresh_venv(home, build_wheel(home))
            except BaseException as exc:
                failed.write_text(str(exc) or repr(exc))
                raise
            ready.touch()
    return home / "venv"
