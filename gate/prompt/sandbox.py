"""Rendering untrusted templates under a CPU-time and memory budget.

A prompt's messages are Jinja templates from a pull request. Jinja's sandbox keeps them
away from Python's internals, but not from the machine's CPU and memory: ``{{ (9**10000)
**10000 }}`` computes inside C code that holds the GIL (the worker froze, heartbeat and
SIGTERM included), two nested ``for`` loops over a million characters spin for ever, and
``'a'|center(1500000000)`` allocates gigabytes. No check of the template text catches every
such form, so the render itself is bounded:

* A prompt whose templates are only text and at most ``PLAIN_MAX_LOOKUPS`` ``{{ item.field }}``
  lookups (``renders_here``) costs time and output linear in the item, which the dataset's
  row limit bounds: it renders in this process.
* Anything else (filters, operators, loops, conditions, calls) renders in a **child
  process** of a small pool (``RenderPool``). Each child runs with an address-space limit
  (its size after start-up + ``memory_mb``), a CPU limit per item (``cpu_seconds``,
  enforced by a profiling timer for Python code and by ``RLIMIT_CPU`` for C code, whose
  SIGXCPU ends the child), an empty environment, and a cap on what it returns. An escape
  from Jinja's sandbox would still run as a process of the worker's user, so two more walls
  stand (``shield_this_process``, ``_drop_privileges``): the process that starts children
  makes itself non-dumpable, so its ``/proc/<pid>/environ`` (the keys) and memory belong
  to root and a same-user process cannot read them; and a child started by root gives up
  root for ``nobody`` before it reads a template. Run workers as a dedicated user: files
  that user can read, an escape could read. The parent waits on a pipe without holding the GIL, so the
  worker keeps heartbeating and answers SIGTERM; a child that does not answer within
  ``2 × cpu_seconds + 1`` s of wall time is killed. A child that overran its budget exits
  and the next render starts a fresh one.

Over budget, the render raises ``BudgetExceeded`` (a ``TemplateProblem``): the item ends
ERROR, not retried. Settings: ``PROMPTGATE_TEMPLATE_CPU_SECONDS`` (2),
``PROMPTGATE_TEMPLATE_MEMORY_MB`` (64), ``PROMPTGATE_SANDBOX_PROCESSES`` (2). Overhead:
bench/README.md ("template sandbox").

The child is ``child_main`` of this module in ``python -I`` (no working directory, no
``PYTHON*`` variables on its path: a checkout's ``gate/`` or ``jinja2/`` is never imported),
started from ``/``; it imports only Jinja and ``gate.prompt.templating``. Frames on its stdin/stdout are a 4-byte length
and UTF-8 JSON.
"""

from __future__ import annotations

import json
import math
import os
import queue
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import nodes

from .templating import PLAIN_ROOTS, TemplateProblem, parse_template, render, render_plain, unrenderable

MAX_RENDERED_CHARS = 1_000_000  # all messages of one item, rendered
PLAIN_MAX_LOOKUPS = 16  # lookups a prompt may print and still render in the worker
MAX_PROBLEM_CHARS = 1000  # a template problem's message, as the child sends it
HEADER = struct.Struct(">I")
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds gate/
CHILD_ENV_KEEP = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "SYSTEMROOT")


class BudgetExceeded(TemplateProblem):
    """The template needed more CPU time or memory than one item may use."""


OVERRUNS = {
    "cpu": "out of CPU time",
    "memory": "out of memory",
    "recursion": "nested too deeply",
    None: "no answer in time: the sandbox process was ended",
}


@dataclass(frozen=True)
class RenderBudget:
    cpu_seconds: float = 2.0
    memory_mb: int = 64
    processes: int = 2

    @classmethod
    def from_settings(cls, settings) -> RenderBudget:
        return cls(settings.template_cpu_seconds, settings.template_memory_mb, settings.sandbox_processes)

    @property
    def wall_seconds(self) -> float:
        """How long the parent waits for an answer before it kills the child: the CPU budget
        with room for a machine whose cores are shared."""
        return 2 * self.cpu_seconds + 1.0

    def describe(self) -> str:
        return f"{self.cpu_seconds:g} s of CPU, {self.memory_mb} MiB"


# ----------------------------------------------------------------------------- plain templates

_PLAIN_NODES = (nodes.Template, nodes.Output, nodes.TemplateData, nodes.Getattr, nodes.Getitem, nodes.Name, nodes.Const)


@lru_cache(maxsize=1024)
def plain_lookups(source: str) -> int | None:
    """How many item lookups a plain template prints; None: the template is not plain.
    Plain is text and ``{{ item.a.b }}`` / ``{{ item['a'] }}`` lookups only: rendering it
    costs time linear in the item, so it needs no sandbox process. Each lookup prints at
    most a whole row, so ``PLAIN_MAX_LOOKUPS`` of them bound its output."""
    try:
        tree = parse_template(source)
    except Exception:  # a syntax error; RecursionError: not plain, the sandbox decides
        return None
    for node in tree.find_all(nodes.Node):
        if not isinstance(node, _PLAIN_NODES):
            return None
        if isinstance(node, nodes.Name) and node.name not in PLAIN_ROOTS:
            return None
        if isinstance(node, nodes.Getitem) and not isinstance(node.arg, nodes.Const):
            return None
    return sum(1 for _ in tree.find_all(nodes.Name))


def renders_here(sources: Sequence[str]) -> bool:
    """Plain templates printing at most ``PLAIN_MAX_LOOKUPS`` lookups in all: bounded time
    and output (each lookup at most a row of ``max_row_bytes``), so no sandbox process."""
    counts = [plain_lookups(s) for s in sources]
    return None not in counts and sum(c or 0 for c in counts) <= PLAIN_MAX_LOOKUPS


# ----------------------------------------------------------------------------- the parent side


class _Child:
    """One sandbox process, its pipes, and the frames read from it so far."""

    def __init__(self, budget: RenderBudget):
        env = {k: v for k, v in os.environ.items() if k in CHILD_ENV_KEEP}
        env["PROMPTGATE_SANDBOX_BUDGET"] = json.dumps([budget.cpu_seconds, budget.memory_mb])
        # -I: no PYTHON* variables, no user site, and neither the working directory (a pull
        # request's checkout, with a gate/ or jinja2/ of its own) nor a script's folder on
        # sys.path; this package is found where this process found it, from the root.
        start = (
            f"import sys; sys.path.insert(0, {str(PACKAGE_ROOT)!r}); import gate.prompt.sandbox as s; s.child_main()"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", start],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd="/",
            close_fds=True,
            start_new_session=True,
        )
        self.buffer = bytearray()

    def send(self, request: dict) -> bool:
        try:
            body = json.dumps(request, ensure_ascii=False).encode()
            assert self.proc.stdin is not None  # started with stdin=PIPE
            self.proc.stdin.write(HEADER.pack(len(body)) + body)
            self.proc.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def next_answer(self, wall_seconds: float) -> dict | None:
        """The next answer frame, or None when the child ended or did not answer within
        ``wall_seconds``. Reads what the pipe holds in one go: the answers of a batch
        arrive back to back, and every read is a wait for the GIL among busy threads."""
        deadline = time.monotonic() + wall_seconds
        assert self.proc.stdout is not None  # started with stdout=PIPE
        fd = self.proc.stdout.fileno()
        while True:
            if len(self.buffer) >= HEADER.size:
                (size,) = HEADER.unpack_from(self.buffer)
                if len(self.buffer) >= HEADER.size + size:
                    frame = bytes(self.buffer[HEADER.size : HEADER.size + size])
                    del self.buffer[: HEADER.size + size]
                    return json.loads(frame)
            left = deadline - time.monotonic()
            try:
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    return None
                data = os.read(fd, 1 << 20)
            except OSError:
                return None
            if not data:
                return None
            self.buffer += data

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        for stream in filter(None, (self.proc.stdin, self.proc.stdout)):  # both pipes, never None
            try:
                stream.close()
            except OSError:
                pass


Rendered = list[str] | TemplateProblem  # one item's messages, or why it has none


class RenderPool:
    """Renders a prompt's messages over items under ``budget`` (see the module docstring).
    Thread-safe; children start on first need (or ``warm``) and after one was ended."""

    def __init__(self, budget: RenderBudget | None = None):
        self.budget = budget or RenderBudget()
        self._idle: queue.Queue[_Child | None] = queue.Queue()
        for _ in range(max(1, self.budget.processes)):
            self._idle.put(None)  # a place for a child not started yet
        self._closed = False
        self._lock = threading.Lock()
        self._children: set[_Child] = set()
        self.stats = {"plain": 0, "sandboxed": 0, "over_budget": 0, "started": 0}

    def warm(self) -> None:
        """Start every child now (a start takes ~0.1 s, in the background), so the first
        template that needs one does not wait for it."""
        places = [self._idle.get() for _ in range(max(1, self.budget.processes))]
        for child in places:
            self._idle.put(child if child is not None else self._start())

    def render(
        self, sources: Sequence[str], item: Mapping[str, Any], skip: Callable[[], str | None] | None = None
    ) -> list[str]:
        """Every source rendered over ``item``; TemplateProblem (BudgetExceeded over budget)."""
        (result,) = self.render_many(sources, [item], skip)
        if isinstance(result, TemplateProblem):
            raise result
        return result

    def render_many(
        self,
        sources: Sequence[str],
        items: Sequence[Mapping[str, Any]],
        skip: Callable[[], str | None] | None = None,
        spent: list | None = None,
        variables: Sequence[Mapping[str, str]] | None = None,
    ) -> list[Rendered]:
        """The sources rendered over each item, in one request to one sandbox process (the
        budget is per item). ``skip``, asked once a process is free, may give a reason not
        to render after all (the template overran its budget on another item meanwhile).
        After an item overruns, the items behind it are not rendered. ``spent`` gets the
        seconds the sandbox process worked on them (not the wait for a free one). ``variables``:
        per item, the names a judge's templates read besides ``item`` (the answers it grades)."""
        if renders_here(sources):
            self.stats["plain"] += len(items)
            return [_render_here(sources, item, variables[i] if variables else None) for i, item in enumerate(items)]
        self.stats["sandboxed"] += len(items)
        results: list[Rendered | None] = [None] * len(items)
        asked: list[int] = []
        texts: list[str] = []
        for i, item in enumerate(items):
            try:
                shown = item if variables is None else {"item": item, "vars": variables[i]}
                texts.append(json.dumps(shown, ensure_ascii=False, allow_nan=False))
                asked.append(i)
            except (TypeError, ValueError) as exc:
                results[i] = TemplateProblem(f"template cannot render this item: {exc}")
        if asked:
            for i, answer in zip(asked, self._in_child(list(sources), texts, skip, spent, variables is not None)):
                results[i] = answer
        return [r for r in results if r is not None]  # all are: each item failed to encode, or was answered

    def _in_child(self, sources: list[str], items: list[str], skip, spent: list | None, pairs=False) -> list[Rendered]:
        child = self._idle.get()
        reason = skip() if skip is not None else None
        if reason:
            self._idle.put(child)
            return [BudgetExceeded(reason) for _ in items]
        answers: list[Rendered] = []
        try:
            if child is None or not child.alive:
                child = self._start()
            started = time.monotonic()
            sent = child.send({"templates": sources, "items": items, "vars": pairs})
            for _ in items:
                answer = child.next_answer(self.budget.wall_seconds) if sent else None
                if answer is None or "budget" in answer:
                    answers += self._overrun(answer, len(items) - len(answers))
                    self._end(child)
                    return answers
                answers.append(
                    TemplateProblem(str(answer["problem"])[:MAX_PROBLEM_CHARS])
                    if "problem" in answer
                    else [str(text) for text in answer["ok"]]
                )
        except BaseException:
            self._end(child)
            raise
        if spent is not None:
            spent.append(time.monotonic() - started)
        self._idle.put(child)
        return answers

    def _overrun(self, answer: dict | None, left: int) -> Sequence[Rendered]:
        """The item that overran and the ones behind it that were not rendered."""
        self.stats["over_budget"] += 1
        spent = OVERRUNS.get((answer or {}).get("budget"), OVERRUNS[None])
        overrun = BudgetExceeded(f"template exceeded its budget of {self.budget.describe()} per item ({spent})")
        behind = BudgetExceeded("not rendered: the template exceeded its budget on an item before it")
        return [overrun] + [behind] * (left - 1)

    def _start(self) -> _Child:
        if self._closed:
            raise TemplateProblem("the template sandbox is shut down")
        shield_this_process()
        child = _Child(self.budget)
        with self._lock:
            self._children.add(child)
        self.stats["started"] += 1
        return child

    def _end(self, child: _Child | None) -> None:
        """Kill a child that overran or failed; its place takes a fresh one on next need."""
        if child is not None:
            child.kill()
            with self._lock:
                self._children.discard(child)
        self._idle.put(None)

    def close(self) -> None:
        self._closed = True
        with self._lock:
            children, self._children = list(self._children), set()
        for child in children:
            child.kill()


PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 4, 38
NOBODY = 65534


def _prctl(option: int, value: int) -> bool:
    """Linux ``prctl(option, value)``; False where there is none (macOS) or it fails."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(option, value, 0, 0, 0) == 0


@lru_cache(maxsize=1)
def shield_this_process() -> bool:
    """Make this process non-dumpable before it starts a sandbox child: the kernel then
    gives its ``/proc/<pid>`` files (environ, mem) to root, and only a process with
    CAP_SYS_PTRACE may read them, so a same-user process (an escaped child) cannot read the
    keys in our environment. It also turns off core dumps (which would hold the keys) and
    same-user debuggers (py-spy needs root then)."""
    return _prctl(PR_SET_DUMPABLE, 0)


def _render_here(sources: Sequence[str], item: Mapping[str, Any], variables=None) -> Rendered:
    """Plain templates, in this process (their cost is linear in the item and the answers)."""
    try:
        return [render_plain(s, item, variables) for s in sources]
    except TemplateProblem as exc:
        return exc
    except Exception as exc:  # a lookup on a value that has none (a str's attribute...)
        return TemplateProblem(unrenderable(exc))


_default_pool: RenderPool | None = None
_default_lock = threading.Lock()


def default_pool() -> RenderPool:
    """The process-wide pool of callers that bring none (the production runtime)."""
    global _default_pool
    with _default_lock:
        if _default_pool is None:
            from gate.settings import Settings

            _default_pool = RenderPool(RenderBudget.from_settings(Settings.from_env()))
        return _default_pool


# ----------------------------------------------------------------------------- the child side


class _CpuBudget(BaseException):
    """Raised in the child by the profiling timer (BaseException: no template code or
    library ``except Exception`` swallows it)."""


def _limit_child(memory_mb: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with open("/proc/self/status") as fh:
        size_kb = next(int(line.split()[1]) for line in fh if line.startswith("VmSize:"))
    limit = size_kb * 1024 + memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


# Modules Jinja imports on first use (string escapes in the lexer, filters such as wordwrap,
# urlize, pprint, its traceback rewriting): imported before a child gives up root, which
# may leave it unable to read the interpreter's own files.
LAZY_IMPORTS = (
    "encodings.unicode_escape",
    "html",
    "html.entities",
    "jinja2.debug",
    "pprint",
    "textwrap",
    "unicodedata",
)


def _drop_privileges() -> None:
    """A child started by root becomes ``nobody`` (no groups) after its imports, and no
    later exec may gain privileges: an escape finds neither root's files nor CAP_SYS_PTRACE."""
    import importlib

    for name in LAZY_IMPORTS:
        importlib.import_module(name)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)


def _arm_cpu(seconds: float) -> None:
    """Python code is stopped by SIGPROF after ``seconds`` of CPU; C code that never
    returns to Python (a huge power) is ended by the kernel's SIGXCPU a second or so later."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    resource.setrlimit(resource.RLIMIT_CPU, (math.ceil(used + seconds) + 1, resource.RLIM_INFINITY))
    signal.setitimer(signal.ITIMER_PROF, seconds)


def _serve_one(templates: list[str], item_text: str, cpu_seconds: float, pairs: bool = False) -> dict:
    try:
        _arm_cpu(cpu_seconds)
        item = json.loads(item_text)  # with ``pairs``: {"item": ..., "vars": the judge's answers}
        out = [render(s, item["item"], item["vars"]) if pairs else render(s, item) for s in templates]
        signal.setitimer(signal.ITIMER_PROF, 0)
        if sum(map(len, out)) > MAX_RENDERED_CHARS:
            return {"problem": f"the rendered messages are over {MAX_RENDERED_CHARS} characters"}
        return {"ok": out}
    except _CpuBudget:
        return {"budget": "cpu"}
    except MemoryError:
        return {"budget": "memory"}
    except TemplateProblem as exc:
        return {"problem": str(exc)[:MAX_PROBLEM_CHARS]}
    except RecursionError:
        return {"budget": "recursion"}
    except Exception as exc:  # TypeError comparing a str field with a number, ...
        return {"problem": unrenderable(exc)}
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


def child_main() -> None:
    cpu_seconds, memory_mb = json.loads(os.environ.get("PROMPTGATE_SANDBOX_BUDGET") or "[2, 64]")

    def on_prof(_signum, _frame):
        raise _CpuBudget

    signal.signal(signal.SIGPROF, on_prof)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends us
    _limit_child(int(memory_mb))
    _drop_privileges()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        header = stdin.read(HEADER.size)
        if len(header) < HEADER.size:
            return  # the parent is gone
        request = json.loads(stdin.read(HEADER.unpack(header)[0]))
        for item_text in request["items"]:  # an answer per item, as soon as it is ready
            answer = _serve_one(request["templates"], item_text, float(cpu_seconds), bool(request.get("vars")))
            body = json.dumps(answer, ensure_ascii=False).encode()
            stdout.write(HEADER.pack(len(body)) + body)
            stdout.flush()
            if "budget" in answer:
                return  # start afresh after an overrun


if __name__ == "__main__":
    child_main()
