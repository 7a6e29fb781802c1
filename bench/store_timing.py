"""Where a run's time goes on the gate's side: every ``gate.store`` function, every
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

# the executor's own steps, beside its store calls (names in workers.execute / .results / .calls)
EXECUTOR_STEPS = {"workers.execute": ["render_messages_many", "trial_keys", "new_answers", "reused_item"],
                  "workers.calls": [], "workers.results": []}
TRANSACTION_USERS = ["workers.execute", "workers.finalize", "workers.reconcile", "workers.materialize",
                     "workers.poller", "gate.ratelimit.limiter", "gate.ratelimit.buckets"]


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

    def __enter__(self) -> "StoreTimer":
        import importlib
        from gate import store
        for name, fn in vars(store).items():
            if inspect.isfunction(fn) and fn.__module__.startswith("gate.store") and not name.startswith("_"):
                self._wrap(store, name, f"store.{name}")
        for module_name in TRANSACTION_USERS:
            module = importlib.import_module(module_name)
            for helper in ("transaction", "read"):
                if hasattr(module, helper):
                    self._wrap(module, helper, f"{helper}() [{module_name.rsplit('.', 1)[-1]}]")
        for module_name, names in EXECUTOR_STEPS.items():
            module = importlib.import_module(module_name)
            for name in names:
                if hasattr(module, name):
                    self._wrap(module, name, f"{module_name.rsplit('.', 1)[-1]}.{name}")
        self._wrap(self.engine.dialect, "do_commit", "driver COMMIT")
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.started
        for owner, name, original in reversed(self.patched):
            setattr(owner, name, original)

    def print(self, items: int) -> None:
        rows = sorted(self.calls.items(), key=lambda kv: -kv[1][1])
        print(f"where the time went ({items} items, wall {self.wall:.2f} s; threads overlap, so shares add up "
              "to more than 100 %):")
        print(f"{'call':<44} {'calls':>7} {'total s':>8} {'ms/call':>8} {'µs/item':>8} {'% wall':>7}")
        for label, (n, spent) in rows:
            if spent < 0.0005 * self.wall:
                continue
            print(f"{label:<44} {n:>7} {spent:>8.3f} {1000 * spent / n:>8.3f} {1e6 * spent / max(1, items):>8.1f} "
                  f"{100 * spent / self.wall:>6.1f}%")
