"""Where a run's time goes on the gate's side: every ``gate.store`` function the workers call, every
transaction of the workers, the driver's COMMIT and the executor's own steps, timed per
call (wall time on the calling thread) while a benchmark runs in this process.

    with StoreTimer(engine) as timer:
        ...                      # run the workers in this process
    timer.print(items)           # a table: calls, total s, ms/call, µs/item, share of wall

Times on different threads overlap (two write-back threads, a render thread, the claimer),
so the shares add up to more than 100 % of the wall; a store call's time includes the
statement's round trip and the server's work, a transaction's includes its store calls
and its COMMIT."""

from __future__ import annotations

import functools
import inspect
import threading
import time
from collections import defaultdict

# the executor's own steps, beside its store calls (names in workers.execute.executor / .results / .calls)
EXECUTOR_STEPS = {
    "workers.execute.executor": ["render_messages_many", "trial_keys", "new_answers", "reused_item"],
    "workers.execute.calls": [],
    "workers.execute.results": [],
}
TRANSACTION_USERS = [
    "workers.execute.executor",
    "workers.finalize",
    "workers.reconcile",
    "workers.materialize",
    "workers.poller",
    "gate.ratelimit.limiter",
    "gate.ratelimit.buckets",
]


def thread_cpu() -> dict[int, tuple[str, float]]:
    """native thread id -> (thread name, CPU seconds so far) for this process's threads."""
    import psutil

    names = {t.native_id: t.name for t in threading.enumerate()}
    return {t.id: (names.get(t.id, "other"), t.user_time + t.system_time) for t in psutil.Process().threads()}


class StoreTimer:
    def __init__(self, engine):
        self.engine = engine
        self.lock = threading.Lock()
        self.calls: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        self.patched: list[tuple[object, str, object]] = []
        self.started = 0.0
        self.wall = 0.0

    def _wrap(self, owner, name: str, label: str) -> None:
        original = getattr(owner, name)
        if getattr(original, "_timed", False):
            return

        @functools.wraps(original)
        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.perf_counter() - began
                with self.lock:
                    entry = self.calls[label]
                    entry[0] += 1
                    entry[1] += spent

        timed._timed = True
        setattr(owner, name, timed)
        self.patched.append((owner, name, original))

    def __enter__(self) -> StoreTimer:
        import importlib

        for module_name in TRANSACTION_USERS:
            module = importlib.import_module(module_name)
            for name, fn in vars(module).items():  # the statements it imported from gate.store
                if inspect.isfunction(fn) and fn.__module__.startswith("gate.store") and not name.startswith("_"):
                    self._wrap(module, name, f"{fn.__module__.removeprefix('gate.')}.{name}")
            for helper in ("transaction", "read"):
                if hasattr(module, helper):
                    self._wrap(module, helper, f"{helper}() [{module_name.rsplit('.', 1)[-1]}]")
        for module_name, names in EXECUTOR_STEPS.items():
            module = importlib.import_module(module_name)
            for name in names:
                if hasattr(module, name):
                    self._wrap(module, name, f"{module_name.rsplit('.', 1)[-1]}.{name}")
        self._wrap(self.engine.dialect, "do_commit", "driver COMMIT")
        self.threads_before = thread_cpu()
        self.threads_after = dict(self.threads_before)
        self.sampling = threading.Event()
        self.sampler = threading.Thread(target=self._sample, daemon=True)
        self.sampler.start()
        self.started = time.perf_counter()
        return self

    def _sample(self) -> None:
        """Thread CPU every 0.1 s (the workers' threads are gone by the time the run ends)."""
        while not self.sampling.wait(0.1):
            self.threads_after.update(thread_cpu())

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.started
        self.sampling.set()
        self.sampler.join()
        for owner, name, original in reversed(self.patched):
            setattr(owner, name, original)

    def print_threads(self) -> None:
        """CPU seconds of each kind of thread over the run, and its share of the wall: a kind
        near 100 % of the wall (per thread) is the stage the others wait for."""
        kinds: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        for ident, (name, seconds) in self.threads_after.items():
            spent = seconds - self.threads_before.get(ident, (name, 0.0))[1]
            kind = name.rstrip("0123456789_").rstrip("-_") or name
            kinds[kind][0] += 1
            kinds[kind][1] += spent
        print(
            "thread CPU over the run:",
            ", ".join(
                f"{kind} ×{int(n)} {spent:.2f} s ({100 * spent / max(1, n) / self.wall:.0f} % each)"
                for kind, (n, spent) in sorted(kinds.items(), key=lambda kv: -kv[1][1])
                if spent > 0.01 * self.wall
            ),
        )

    def print(self, items: int) -> None:
        self.print_threads()
        rows = sorted(self.calls.items(), key=lambda kv: -kv[1][1])
        print(
            f"where the time went ({items} items, wall {self.wall:.2f} s; threads overlap, so shares add up "
            "to more than 100 %):"
        )
        print(f"{'call':<44} {'calls':>7} {'total s':>8} {'ms/call':>8} {'µs/item':>8} {'% wall':>7}")
        for label, (n, spent) in rows:
            if spent < 0.0005 * self.wall:
                continue
            print(
                f"{label:<44} {n:>7} {spent:>8.3f} {1000 * spent / n:>8.3f} {1e6 * spent / max(1, items):>8.1f} "
                f"{100 * spent / self.wall:>6.1f}%"
            )
