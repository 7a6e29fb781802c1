"""The executor's call threads: ``size`` threads taking items' calls from one queue.

A ``ThreadPoolExecutor`` made a Future (a condition and its lock), a work item and a
thread-count check for every item it was handed; the executor never reads the Future (an
item's outcome comes back through ``ChunkLedger.answered``). With a fast provider, or an
instant one in P4, that was a tenth of the process's GIL time (bench/README.md, the
database path). Here an item's call is one ``SimpleQueue.put`` of a tuple, taken by the
next free thread in C."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from queue import Empty, SimpleQueue
from typing import Any

log = logging.getLogger("promptgate.execute")


class CallThreads:
    def __init__(self, size: int, name: str = "call"):
        self.tasks: SimpleQueue = SimpleQueue()
        self.threads = [threading.Thread(target=self._work, name=f"{name}_{n}", daemon=True) for n in range(size)]
        for thread in self.threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        self.tasks.put((fn, args))

    def _work(self) -> None:
        while True:
            task = self.tasks.get()
            if task is None:
                return
            fn, args = task
            try:
                fn(*args)
            except Exception:  # the task owns its errors (``Executor._score``); this only keeps the thread
                log.exception("a call thread's task raised")

    def shutdown(self, cancel: bool = True) -> None:
        """Stop every thread once it finishes its task in hand; with ``cancel`` the tasks not
        begun are dropped (a draining executor has given their items back already)."""
        if cancel:
            try:
                while True:
                    self.tasks.get_nowait()
            except Empty:
                pass
        for _ in self.threads:
            self.tasks.put(None)
