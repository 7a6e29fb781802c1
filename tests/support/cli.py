"""The repository's root, and the real `promptgate` CLI run as a process of its own from it:
forked from the test process's preloaded server (support.forkserver: the command's imports
are paid once, not per command; its output through files, its exit status the interpreter's),
or `python -m gate.cli` when PROMPTGATE_TEST_FORK=0."""

from __future__ import annotations

import locale
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args, env=None, input=None, timeout=120, cwd=None, module="gate.cli", unset=()):
    """Run the real `promptgate` CLI as a process of its own; a ``subprocess.CompletedProcess``.
    ``module``: what ``python -m`` runs (``gate``: as the Action's steps run it); ``unset``: the
    test process's variables the command does not get."""
    full_env = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in unset}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), full_env.get("PYTHONPATH")]))
    from support import forkserver

    if not forkserver.wanted() or forkserver.interpreter_env_differs(full_env):
        return subprocess.run(
            [sys.executable, "-m", module, *map(str, args)],
            capture_output=True,
            text=True,
            env=full_env,
            input=input,
            timeout=timeout,
            cwd=cwd or ROOT,
        )
    return _forked(list(map(str, args)), full_env, input, timeout, cwd or ROOT, module)


def _forked(
    argv: list[str], env: dict, input: str | None, timeout: float | None, cwd, module: str = "gate.cli"
) -> subprocess.CompletedProcess:
    encoding = locale.getpreferredencoding(False)
    with tempfile.TemporaryDirectory(prefix="promptgate-cli-") as folder:
        out, err, into = (str(Path(folder) / name) for name in ("stdout", "stderr", "stdin"))
        Path(into).write_text(input or "", encoding=encoding)
        from support.forkserver import fork_server

        proc = fork_server(ROOT).spawn(argv, env, cwd, out, err, into if input is not None else None, module=module)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
            said = (Path(out).read_text(encoding, "replace"), Path(err).read_text(encoding, "replace"))
            raise subprocess.TimeoutExpired(["promptgate", *argv], timeout, *said) from None
        said = (Path(out).read_text(encoding), Path(err).read_text(encoding))
    return subprocess.CompletedProcess([sys.executable, "-m", module, *argv], code, *said)
