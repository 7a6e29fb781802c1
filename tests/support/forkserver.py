"""`promptgate worker` processes forked from one that has imported their modules already: a
fleet of N costs one import (~1.1 s of CPU: the openai SDK, SQLAlchemy, the workers'
package), not N. Each worker is still a process of its own, started with its own argv,
environment, working folder and log, running ``python -m gate.cli`` as the command line
would (``runpy``, then the interpreter's normal exit: non-daemon threads joined, ``atexit``
run); it is killed, stopped and signalled like any other, and its exit status is the
interpreter's (``-9`` after SIGKILL, as ``Popen.returncode`` says it).

The server (``python -m support.forkserver``) is single-threaded: it imports, then reads
one JSON request a line on stdin and answers on stdout, ``{"pid": N}`` for each fork and
``{"exited": N, "returncode": R}`` when it has reaped a child. ``ForkServer.spawn`` gives
a ``Forked`` object with ``Popen``'s process methods (pid, poll, wait, send_signal,
terminate, kill, returncode)."""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


def wanted() -> bool:
    """Forked unless PROMPTGATE_TEST_FORK=0 (every process started as `python -m gate.cli`)."""
    return os.environ.get("PROMPTGATE_TEST_FORK", "1") != "0"


def interpreter_env_differs(env: dict) -> bool:
    """The variables an interpreter reads once as it starts (PYTHON*, the locale's) set otherwise
    than for the server: such a command is started fresh, as ``python -m gate.cli``."""

    def start_time(e: dict) -> dict:
        return {k: v for k, v in e.items() if (k.startswith(("PYTHON", "LC_")) or k == "LANG") and k != "PYTHONPATH"}

    return start_time(env) != start_time(dict(os.environ))


# what `promptgate worker` imports (python -X importtime -m gate.cli worker): the roles' modules,
# the openai SDK under gate.calls.llm (~1 s of CPU alone), and the MariaDB driver
PRELOAD = (
    "gate.cli",
    "workers.supervisor",
    "workers.materialize",
    "workers.execute.executor",
    "pymysql",
    "gate.mysql_tls",
    "gate.service.app",  # `promptgate serve`: FastAPI and uvicorn (~0.5 s)
    "uvicorn",
    "yaml",
    "jinja2",
)


def _child(request: dict) -> None:
    """In the forked child: become the requested command, then exit as the interpreter does
    (in a session and process group of its own when asked: ``Popen(start_new_session=True)``)."""
    signal.set_wakeup_fd(-1)  # the server's SIGCHLD wake-up is not the command's
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if request.get("new_session"):
        os.setsid()
    stdin = os.open(request.get("stdin") or os.devnull, os.O_RDONLY)
    stdout = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    stderr = (
        stdout
        if request["stderr"] == request["stdout"]
        else os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    )
    os.dup2(stdin, 0)
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    os.closerange(3, 1024)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.path[:0] = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
    sys.argv = ["-m", *request["argv"]]
    import runpy

    runpy.run_module(request.get("module", "gate.cli"), run_name="__main__", alter_sys=True)
    sys.exit(0)


def _chld_wakeup() -> int:
    """A pipe that becomes readable whenever a child exits (SIGCHLD through the interpreter's
    wake-up fd); its read end."""
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler: the signal is not ignored
    signal.set_wakeup_fd(write)
    return read


def serve(preload: tuple[str, ...] = PRELOAD) -> None:
    """The fork server's loop: requests from stdin, forks, reaped children to stdout."""
    import importlib

    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:  # the command imports it when it needs it, as it would anyway
            pass
    out = sys.stdout.fileno()
    woken = _chld_wakeup()
    os.write(out, b'{"ready": true}\n')
    buffered = b""
    children: set[int] = set()
    while True:
        # asleep until a request or a child's exit (SIGCHLD): a 20 ms poll was ~4 ms of CPU a
        # second per idle server, all session long (the 1 s timeout only a safety net)
        readable, _, _ = select.select([0, woken], [], [], 1.0)
        if woken in readable:
            os.read(woken, 4096)
        if 0 in readable:
            chunk = os.read(0, 65536)
            if not chunk:
                return  # the test process is gone: so is the server (its children run on)
            buffered += chunk
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                pid = os.fork()
                if pid == 0:
                    _child(json.loads(line))  # never returns: the child exits through the interpreter
                children.add(pid)
                os.write(out, json.dumps({"pid": pid}).encode() + b"\n")
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                code = os.waitstatus_to_exitcode(status)
                os.write(out, json.dumps({"exited": pid, "returncode": code}).encode() + b"\n")


class Forked:
    """A process the fork server started, with the parts of ``Popen`` the tests use."""

    def __init__(self, server: ForkServer, pid: int):
        self.server, self.pid, self.returncode = server, pid, None
        self.exited = threading.Event()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self.exited.wait(timeout):
            raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """The server process and the thread that reads its answers."""

    def __init__(self, root: Path, preload: tuple[str, ...] = ()):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests")])}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "support.forkserver", *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=root,
        )
        ready = self.proc.stdout.readline()
        if not ready:
            raise RuntimeError(f"the fork server did not start (exit {self.proc.wait()})")
        self.lock = threading.Lock()
        self.spawning = threading.Lock()  # held from a request to its answer (the condition lets go of ``lock``)
        self.pending: list[Forked] = []  # spawned, pid not yet answered
        self.started: dict[int, Forked] = {}
        self.answered = threading.Condition(self.lock)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        early: dict[int, int] = {}  # exits read before the pid's own answer was handled
        for line in self.proc.stdout:
            said = json.loads(line)
            with self.lock:
                if "pid" in said:
                    forked = Forked(self, said["pid"])
                    self.started[forked.pid] = forked
                    self.pending.append(forked)
                    if forked.pid in early:
                        forked.returncode = early.pop(forked.pid)
                        forked.exited.set()
                    self.answered.notify_all()
                else:
                    forked = self.started.pop(said["exited"], None)
                    if forked is None:
                        early[said["exited"]] = said["returncode"]
                        continue
                    forked.returncode = said["returncode"]
                    forked.exited.set()

    def spawn(
        self,
        argv: list[str],
        env: dict,
        cwd: Path,
        stdout: str,
        stderr: str | None = None,
        stdin: str | None = None,
        new_session: bool = False,
        module: str = "gate.cli",
    ) -> Forked:
        """``python -m MODULE *argv`` forked (``gate.cli`` by default); its output appended to the files named (stderr
        to stdout's by default), its input read from ``stdin`` (default /dev/null);
        ``new_session``: in a session and process group of its own (its pid the group's)."""
        io = {"stdout": stdout, "stderr": stderr or stdout, "stdin": stdin}
        request = {"argv": argv, "env": env, "cwd": str(cwd), "new_session": new_session, "module": module, **io}
        line = json.dumps(request) + "\n"
        deadline = time.monotonic() + 30
        with self.spawning, self.lock:  # one request at a time: the answer read next is its pid
            self.proc.stdin.write(line.encode())
            self.proc.stdin.flush()
            while not self.pending:
                if self.proc.poll() is not None or not self.answered.wait(max(0.0, deadline - time.monotonic())):
                    raise RuntimeError(f"the fork server did not fork (exit {self.proc.poll()})")
            return self.pending.pop(0)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


_servers: dict[tuple[str, ...], ForkServer] = {}


def fork_server(root: Path, preload: tuple[str, ...] = ()) -> ForkServer:
    """The test process's fork server for ``preload`` (the modules it imports before it forks;
    none named: the CLI's, ``PRELOAD``), started on first use (pytest ends it at exit: its
    stdin closes, and the server is waited for)."""
    server = _servers.get(preload)
    if server is None or server.proc.poll() is not None:
        server = _servers[preload] = ForkServer(root, preload)
        atexit.register(server.close)  # waited for: its CPU and its children's counted as the run's
    return server


if __name__ == "__main__":
    serve(tuple(sys.argv[1:]) or PRELOAD)
