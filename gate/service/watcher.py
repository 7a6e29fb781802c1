"""One watcher of update statuses per server process, shared by every long-poll wait.

A wait registers a future for its update; while any wait is registered, one task reads
the statuses of all the waited-for updates in a single primary-key IN query every
``interval`` seconds, on one kept autocommit connection (``db.KeptConnection``), and
resolves the futures of updates that turned terminal (or are unknown). So 1,000 waiters
cost the database ``1 / interval`` queries a second, not 1,000, and a waiter wakes within
``interval`` (plus one query) of its update turning terminal. With no waiter, no query.
A beat that fails, whatever the error, is logged and the next beat reads again: one
waiter's bad input never stops the others' wakes (an id outside BIGINT's range is refused
before it is registered: ``edge.in_range``, and here as UNKNOWN).

Each waiter says what it will want once woken (``want``: for the API, its report's key),
and ``prepare`` is awaited with those of the updates that ended before their waiters
wake: the reports are built while the event loop is idle, and the woken waiters find them
made. Built after the wake, the reports' queries competed with a thousand waiters being
resumed and answered: 10 reports ended 0.14-0.46 s after the wake, where before it they
take 40-90 ms (bench/README.md, `service_waiters.py`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable

from sqlalchemy.exc import DBAPIError

from gate import db
from gate.states import UPDATE_TERMINAL
from gate.store.updates import update_statuses

from .edge import MAX_ID

log = logging.getLogger("promptgate.server")
UNKNOWN = "UNKNOWN"
PREPARE_SECONDS = 1.0


Prepare = Callable[[dict[int, set[Hashable]]], Awaitable[object]]


class StatusWatcher:
    def __init__(self, engine, interval: float = 0.25, prepare: Prepare | None = None):
        self.engine, self.interval, self.prepare = engine, interval, prepare
        self.waiters: dict[int, dict[asyncio.Future, Hashable]] = {}  # update id → its waiters and their wants
        self.task: asyncio.Task | None = None
        self.polls = 0  # queries made (for /metrics and the tests)

    @property
    def waiting(self) -> int:
        return sum(len(w) for w in self.waiters.values())

    async def wait(self, update_id: int, timeout: float, want: Hashable = None) -> str | None:
        """The update's status once terminal (``UNKNOWN`` for no such update), or None
        when ``timeout`` seconds pass first. ``want``: what ``prepare`` makes for this
        waiter before it wakes (None: nothing)."""
        if not 0 < update_id <= MAX_ID:  # no such row, and a query would fail on it
            return UNKNOWN
        future = asyncio.get_running_loop().create_future()
        self.waiters.setdefault(update_id, {})[future] = want
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._watch())
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            return None
        finally:
            self._forget(update_id, future)

    def _forget(self, update_id: int, future: asyncio.Future) -> None:
        waiting = self.waiters.get(update_id)
        if waiting is not None:
            waiting.pop(future, None)
            if not waiting:
                del self.waiters[update_id]

    async def _watch(self) -> None:
        reader = db.KeptConnection(self.engine)
        try:
            while self.waiters:
                started = time.monotonic()
                ids = list(self.waiters)
                try:
                    statuses = await asyncio.to_thread(reader.run, lambda conn: update_statuses(conn, ids))
                    self.polls += 1
                except DBAPIError as exc:  # the database away: keep waiting, read again next beat
                    log.warning("status watcher: %s", str(exc.orig or exc).splitlines()[0][:200])
                    statuses = None
                except Exception:  # anything else: each read alone, a failing one woken as unknown
                    log.exception("status watcher: reading %d update(s)", len(ids))
                    statuses = await self._one_by_one(reader, ids)
                if statuses is not None:
                    await self._prepare(ids, statuses)
                    self._wake(ids, statuses)
                await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))
        finally:
            # closed off the loop and not awaited: a waiter that arrives once the loop has seen
            # no waiter left must find this task done (and start the next), never a task still
            # closing its connection that will not look at the waiters again
            asyncio.get_running_loop().run_in_executor(None, reader.close)

    async def _one_by_one(self, reader: db.KeptConnection, ids: list[int]) -> dict[int, str] | None:
        """After a beat failed for a reason other than the database: each update's status
        read alone; one whose read fails by itself is UNKNOWN (its waiters wake and go),
        so no waiter's bad id keeps the others from waking. None: the database failed."""
        found: dict[int, str] = {}
        for update_id in ids:
            try:
                found.update(await asyncio.to_thread(reader.run, lambda c, i=update_id: update_statuses(c, [i])))
            except DBAPIError:
                return None
            except Exception:
                found[update_id] = UNKNOWN
        return found

    async def _prepare(self, ids: list[int], statuses: dict[int, str]) -> None:
        """What the waiters of the updates that ended will want, made before they wake.
        A failure is theirs to meet (each asks again once woken): logged, never raised.
        At most ``PREPARE_SECONDS``: past that (a database under strain) the waiters wake
        and wait for what is still being made, and the beat goes on."""
        wanted = {
            uid: {w for w in self.waiters.get(uid, {}).values() if w is not None}
            for uid in ids
            if statuses.get(uid) in UPDATE_TERMINAL
        }
        wanted = {uid: wants for uid, wants in wanted.items() if wants}
        if self.prepare is None or not wanted:
            return
        try:
            await asyncio.wait_for(self.prepare(wanted), PREPARE_SECONDS)
        except Exception as exc:  # the waiters, woken, ask for theirs and meet the error themselves
            log.warning(
                "status watcher: preparing %d ended update(s): %s",
                len(wanted),
                (str(exc).splitlines() or [type(exc).__name__])[0][:200],
            )

    def _wake(self, ids: list[int], statuses: dict[int, str]) -> None:
        for update_id in ids:
            status = statuses.get(update_id, UNKNOWN)
            if status in UPDATE_TERMINAL or status == UNKNOWN:
                for future in self.waiters.get(update_id, ()):
                    if not future.done():
                        future.set_result(status)
