"""One watcher of update statuses per server process, shared by every long-poll wait.

A wait registers a future for its update; while any wait is registered, one task reads
the statuses of all the waited-for updates in a single primary-key IN query every
``interval`` seconds, on one kept autocommit connection (``db.KeptConnection``), and
resolves the futures of updates that turned terminal (or are unknown). So 1,000 waiters
cost the database ``1 / interval`` queries a second, not 1,000, and a waiter wakes within
``interval`` (plus one query) of its update turning terminal. With no waiter, no query."""

from __future__ import annotations

import asyncio
import logging
import time

from sqlalchemy.exc import DBAPIError

from .. import db, store
from ..states import UPDATE_TERMINAL

log = logging.getLogger("promptgate.server")
UNKNOWN = "UNKNOWN"


class StatusWatcher:
    def __init__(self, engine, interval: float = 0.25):
        self.engine, self.interval = engine, interval
        self.waiters: dict[int, set[asyncio.Future]] = {}
        self.task: asyncio.Task | None = None
        self.polls = 0                       # queries made (for /metrics and the tests)

    @property
    def waiting(self) -> int:
        return sum(len(w) for w in self.waiters.values())

    async def wait(self, update_id: int, timeout: float) -> str | None:
        """The update's status once terminal (``UNKNOWN`` for no such update), or None
        when ``timeout`` seconds pass first."""
        future = asyncio.get_running_loop().create_future()
        self.waiters.setdefault(update_id, set()).add(future)
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._watch())
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            return None
        finally:
            self._forget(update_id, future)

    def _forget(self, update_id: int, future: asyncio.Future) -> None:
        waiting = self.waiters.get(update_id)
        if waiting is not None:
            waiting.discard(future)
            if not waiting:
                del self.waiters[update_id]

    async def _watch(self) -> None:
        reader = db.KeptConnection(self.engine)
        try:
            while self.waiters:
                started = time.monotonic()
                ids = list(self.waiters)
                try:
                    statuses = await asyncio.to_thread(reader.run, lambda conn: store.update_statuses(conn, ids))
                    self.polls += 1
                except DBAPIError as exc:       # the database away: keep waiting, read again next beat
                    log.warning("status watcher: %s", str(exc.orig or exc).splitlines()[0][:200])
                    statuses = None
                if statuses is not None:
                    self._wake(ids, statuses)
                await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))
        finally:
            await asyncio.to_thread(reader.close)

    def _wake(self, ids: list[int], statuses: dict[int, str]) -> None:
        for update_id in ids:
            status = statuses.get(update_id, UNKNOWN)
            if status in UPDATE_TERMINAL or status == UNKNOWN:
                for future in self.waiters.get(update_id, ()):
                    if not future.done():
                        future.set_result(status)
