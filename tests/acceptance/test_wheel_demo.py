"""`pip install` then `promptgate demo` in an empty folder (issue 50.3): the wheel built from
this tree, installed into a fresh virtual environment, runs the demo from the examples it
ships (``gate/example``), not from a checkout. It failed twice before: the examples were
read through ``importlib.resources.files`` of a folder without ``__init__`` (a
``MultiplexedPath``, whose ``str()`` is no path), and ``gate.kinds`` was missing from the
wheel's package list.

The environment is ``installed_wheel`` (tests/acceptance/conftest.py): the wheel and the
dependencies it declares, installed by pip into a venv without system site-packages, made
once per test run and shared with test_cli's install test.

It runs the demo as ``--format markdown`` and checks the pull request's Markdown there (a
report's table, its Mermaid chart) for test_demo_runtime.py, which checks the default text
form from the checkout: one demo run fewer (each ~7 s of CPU). The Markdown form imports every
package the text form does, and gate.kinds besides."""

from __future__ import annotations

import os
import subprocess


def test_the_installed_wheels_demo_runs_in_an_empty_folder(installed_wheel, tmp_path):
    venv = installed_wheel
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PROMPTGATE_", "OPENAI_"))}
    result = subprocess.run(
        [str(venv / "bin" / "promptgate"), "demo", "--format", "markdown"],
        capture_output=True,
        text=True,
        cwd=empty,
        env=env,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    (synced,) = [line for line in lines if line.startswith("synced ")]
    assert f"{venv}/lib/" in synced and "/site-packages/gate/example/gate.yaml" in synced, synced
    (summary,) = [line for line in lines if line.startswith("## result: ")]
    assert summary.startswith("## result: 4 changes REJECTED, 1 APPLIED — ") and "As expected." in summary, summary
    assert "| urgency-hard |" in result.stdout and "```mermaid" in result.stdout  # the pull request's Markdown
    assert not list(empty.iterdir())  # nothing left behind in the folder it ran in
