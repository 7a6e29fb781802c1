"""Rendering untrusted templates under a CPU-time and memory budget.

A prompt's messages are Jinja templates from a pull request. Jinja's sandbox keeps them
away from Python's internals, but not from the machine's CPU and memory: ``{{ (9**10000)
**10000 }}`` computes inside C code that holds the GIL (the worker froze, heartbeat and
SIGTERM included), two nested ``for`` loops over a million characters spin for ever, and
``'a'|center(1500000000)`` allocates gigabytes. No check of the template text catches every
such form, so the render itself is bounded:

* A template made only of text and ``{{ item.field }}`` lookups (``is_plain``) costs time
  linear in the item, which the dataset's row limit bounds: it renders in this process.
* Anything else (filters, operators, loops, conditions, calls) renders in a **child
  process** of a small pool (``RenderPool``). Each child runs with an address-space limit
  (its size after start-up + ``memory_mb``), a CPU limit per item (``cpu_seconds``,
  enforced by a profiling timer for Python code and by ``RLIMIT_CPU`` for C code, whose
  SIGXCPU ends the child), no environment (no keys or URLs to read even from an escape),
  and a cap on what it returns. The parent waits on a pipe without holding the GIL, so the
  worker keeps heartbeating and answers SIGTERM; a child that does not answer within
  ``2 × cpu_seconds + 1`` s of wall time is killed. A child that overran its budget exits
  and the next render starts a fresh one.

Over budget, the render raises ``BudgetExceeded`` (a ``TemplateProblem``): the item ends
ERROR, not retried. Settings: ``PROMPTGATE_TEMPLATE_CPU_SECONDS`` (2),
``PROMPTGATE_TEMPLATE_MEMORY_MB`` (64), ``PROMPTGATE_SANDBOX_PROCESSES`` (2). Overhead:
bench/README.md ("template sandbox").

The child is this module run as ``python -m gate.sandbox``; it imports only Jinja and
``gate.templating``. Frames on its stdin/stdout are a 4-byte length and UTF-8 JSON.
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
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

from jinja2 import TemplateSyntaxError, nodes

from .templating import TemplateProblem, parse_template, render

MAX_RENDERED_CHARS = 1_000_000     # all messages of one item, rendered
HEADER = struct.Struct(">I")
CHILD_ENV_KEEP = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "SYSTEMROOT")


class BudgetExceeded(TemplateProblem):
    """The template needed more CPU time or memory than one item may use."""


OVERRUNS = {"cpu": "out of CPU time", "memory": "out of memory", "recursion": "nested too deeply",
            None: "no answer in time: the sandbox process was ended"}


@dataclass(frozen=True)
class RenderBudget:
    cpu_seconds: float = 2.0
    memory_mb: int = 64
    processes: int = 2

    @classmethod
    def from_settings(cls, settings) -> "RenderBudget":
        return cls(settings.template_cpu_seconds, settings.template_memory_mb, settings.sandbox_processes)

    @property
    def wall_seconds(self) -> float:
        """How long the parent waits for an answer before it kills the child: the CPU budget
        with room for a machine whose cores are shared."""
        return 2 * self.cpu_seconds + 1.0

    def describe(self) -> str:
        return f"{self.cpu_seconds:g} s of CPU, {self.memory_mb} MiB"


# ----------------------------------------------------------------------------- plain templates

_PLAIN_NODES = (nodes.Template, nodes.Output, nodes.TemplateData, nodes.Getattr, nodes.Getitem, nodes.Name,
                nodes.Const)


@lru_cache(maxsize=1024)
def is_plain(source: str) -> bool:
    """Text and ``{{ item.a.b }}`` / ``{{ item['a'] }}`` lookups only: rendering it costs
    time linear in the item, so it needs no sandbox process."""
    try:
        tree = parse_template(source)
    except TemplateSyntaxError:
        return False
    for node in tree.find_all(nodes.Node):
        if not isinstance(node, _PLAIN_NODES):
            return False
        if isinstance(node, nodes.Name) and node.name != "item":
            return False
        if isinstance(node, nodes.Getitem) and not isinstance(node.arg, nodes.Const):
            return False
    return True


# ----------------------------------------------------------------------------- the parent side

class _Child:
    """One sandbox process and its pipes."""

    def __init__(self, budget: RenderBudget):
        env = {k: v for k, v in os.environ.items() if k in CHILD_ENV_KEEP}
        env["PROMPTGATE_SANDBOX_BUDGET"] = json.dumps([budget.cpu_seconds, budget.memory_mb])
        self.proc = subprocess.Popen([sys.executable, "-m", "gate.sandbox"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                     close_fds=True, start_new_session=True)

    def ask(self, request: dict, wall_seconds: float) -> dict | None:
        """The child's answer, or None when it died or did not answer in time (it is then
        killed)."""
        try:
            body = json.dumps(request, ensure_ascii=False).encode()
            self.proc.stdin.write(HEADER.pack(len(body)) + body)
            self.proc.stdin.flush()
            deadline = time.monotonic() + wall_seconds
            size, = HEADER.unpack(self._read(HEADER.size, deadline))
            return json.loads(self._read(size, deadline))
        except (OSError, ValueError, struct.error, TimeoutError):
            self.kill()
            return None

    def _read(self, n: int, deadline: float) -> bytes:
        fd, chunks, got = self.proc.stdout.fileno(), [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, n - got)
            if not chunk:
                raise EOFError("the sandbox process ended") from None
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

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
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


class RenderPool:
    """Renders a prompt's messages over an item under ``budget`` (see the module
    docstring). Thread-safe; children start on first need and after one was ended."""

    def __init__(self, budget: RenderBudget | None = None):
        self.budget = budget or RenderBudget()
        self._idle: queue.Queue[_Child | None] = queue.Queue()
        for _ in range(max(1, self.budget.processes)):
            self._idle.put(None)          # a place for a child not started yet
        self._closed = False
        self._lock = threading.Lock()
        self._children: set[_Child] = set()
        self.stats = {"plain": 0, "sandboxed": 0, "over_budget": 0, "started": 0}

    def render(self, sources: Sequence[str], item: Mapping[str, Any],
               skip: Callable[[], str | None] | None = None) -> list[str]:
        """Every source rendered over ``item``; TemplateProblem (BudgetExceeded over budget).
        ``skip``, asked once a sandbox process is free, may give a reason not to render
        after all (the template overran its budget on another item meanwhile)."""
        if all(is_plain(s) for s in sources):
            self.stats["plain"] += 1
            return [render(s, item) for s in sources]
        self.stats["sandboxed"] += 1
        try:
            item_json = json.dumps(item, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TemplateProblem(f"template cannot render this item: {exc}") from None
        return self._in_child({"templates": list(sources), "item": item_json}, skip)

    def _in_child(self, request: dict, skip: Callable[[], str | None] | None) -> list[str]:
        child = self._idle.get()
        reason = skip() if skip is not None else None
        if reason:
            self._idle.put(child)
            raise BudgetExceeded(reason)
        try:
            if child is None or not child.alive:
                child = self._start()
            answer = child.ask(request, self.budget.wall_seconds)
        except BaseException:
            self._end(child)
            raise
        if answer is None or "budget" in answer:
            self._end(child)
            self.stats["over_budget"] += 1
            spent = OVERRUNS.get((answer or {}).get("budget"), OVERRUNS[None])
            raise BudgetExceeded(f"template exceeded its budget of {self.budget.describe()} per item ({spent})")
        self._idle.put(child)
        if "problem" in answer:
            raise TemplateProblem(str(answer["problem"])[:1000])
        return [str(text) for text in answer["ok"]]

    def _start(self) -> _Child:
        if self._closed:
            raise TemplateProblem("the template sandbox is shut down")
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


_default_pool: RenderPool | None = None
_default_lock = threading.Lock()


def default_pool() -> RenderPool:
    """The process-wide pool of callers that bring none (the production runtime)."""
    global _default_pool
    with _default_lock:
        if _default_pool is None:
            from .settings import Settings
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


def _arm_cpu(seconds: float) -> None:
    """Python code is stopped by SIGPROF after ``seconds`` of CPU; C code that never
    returns to Python (a huge power) is ended by the kernel's SIGXCPU a second or so later."""
    import resource
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    resource.setrlimit(resource.RLIMIT_CPU, (math.ceil(used + seconds) + 1, resource.RLIM_INFINITY))
    signal.setitimer(signal.ITIMER_PROF, seconds)


def _serve_one(request: dict, cpu_seconds: float) -> dict:
    try:
        _arm_cpu(cpu_seconds)
        item = json.loads(request["item"])
        out = [render(s, item) for s in request["templates"]]
        signal.setitimer(signal.ITIMER_PROF, 0)
        if sum(map(len, out)) > MAX_RENDERED_CHARS:
            return {"problem": f"the rendered messages are over {MAX_RENDERED_CHARS} characters"}
        return {"ok": out}
    except _CpuBudget:
        return {"budget": "cpu"}
    except MemoryError:
        return {"budget": "memory"}
    except TemplateProblem as exc:
        return {"problem": str(exc)}
    except RecursionError:
        return {"budget": "recursion"}
    except Exception as exc:     # TypeError comparing a str field with a number, ...
        return {"problem": f"template cannot render this item: {type(exc).__name__}: {str(exc)[:300]}"}
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


def _child_main() -> None:
    cpu_seconds, memory_mb = json.loads(os.environ.get("PROMPTGATE_SANDBOX_BUDGET") or "[2, 64]")

    def on_prof(_signum, _frame):
        raise _CpuBudget

    signal.signal(signal.SIGPROF, on_prof)
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # the parent ends us
    _limit_child(int(memory_mb))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        header = stdin.read(HEADER.size)
        if len(header) < HEADER.size:
            return                                    # the parent is gone
        request = json.loads(stdin.read(HEADER.unpack(header)[0]))
        answer = _serve_one(request, float(cpu_seconds))
        body = json.dumps(answer, ensure_ascii=False).encode()
        stdout.write(HEADER.pack(len(body)) + body)
        stdout.flush()
        if "budget" in answer:
            return                                    # start afresh after an overrun


if __name__ == "__main__":
    _child_main()
