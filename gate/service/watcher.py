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
take 40-90 ms (bench/README.md, `service_waiters.py`).

The end of an update is not announced (the worker that ends it knows nothing of the
service's waiters), so the beat quickens near it: each beat that sees waited-for
updates RUNNING asks which of them (at most ``NEAR_END_CHECKED``) have fewer than 64 items
unanswered in every open run, and while one has (at most ``NEAR_END_SECONDS`` each) the
beat comes every ``FAST_INTERVAL``: a waiter wakes ~10 ms after its update ends, for one
query more a beat while updates run and ~50 queries a second over an update's last wave.
A submission through the service nudges the watcher (``nudge``): the checks it replaced
ended, and their waiters wake at once."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable

from sqlalchemy.exc import DBAPIError

from gate import db
from gate.states import UPDATE_TERMINAL, UpdateStatus
from gate.store.updates import update_statuses
from gate.store.wake import updates_near_end

from .edge import MAX_ID

log = logging.getLogger("promptgate.server")
UNKNOWN = "UNKNOWN"
PREPARE_SECONDS = 1.0
FAST_INTERVAL = 0.02  # the beat while a waited-for update is near its end
NEAR_END_SECONDS = 3.0  # the most one update keeps the beat fast
NEAR_END_CHECKED = 32  # updates asked about a beat (each an index range of at most 64 entries a run)


Prepare = Callable[[dict[int, set[Hashable]]], Awaitable[object]]


class StatusWatcher:
    def __init__(self, engine, interval: float = 0.25, prepare: Prepare | None = None):
        self.engine, self.interval, self.prepare = engine, interval, prepare
        self.waiters: dict[int, dict[asyncio.Future, Hashable]] = {}  # update id → its waiters and their wants
        self.task: asyncio.Task | None = None
        self.polls = 0  # queries made (for /metrics and the tests)
        self.near: dict[int, float] = {}  # RUNNING updates seen near their end → when first seen so
        self.woken: asyncio.Event | None = None

    def nudge(self) -> None:
        """Read again now rather than at the next beat (a submission ended the checks it replaced)."""
        if self.woken is not None:
            self.woken.set()

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
        self.woken = asyncio.Event()  # this task's loop's (a nudge sets it)
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
                delay = self.interval
                if statuses is not None:
                    await self._prepare(ids, statuses)
                    self._wake(ids, statuses)
                    delay = await self._next_beat(reader, statuses)
                await self._sleep(max(0.0, delay - (time.monotonic() - started)))
        finally:
            # closed off the loop and not awaited: a waiter that arrives once the loop has seen
            # no waiter left must find this task done (and start the next), never a task still
            # closing its connection that will not look at the waiters again
            asyncio.get_running_loop().run_in_executor(None, reader.close)

    async def _sleep(self, seconds: float) -> None:
        woken = self.woken = self.woken or asyncio.Event()
        try:
            await asyncio.wait_for(woken.wait(), seconds)
        except TimeoutError:
            pass
        woken.clear()

    async def _next_beat(self, reader: db.KeptConnection, statuses: dict[int, str]) -> float:
        """FAST_INTERVAL while a waited-for update is near its end (for NEAR_END_SECONDS at
        most), else the interval; a beat that is not fast asks which running ones are near."""
        now = time.monotonic()
        running = [uid for uid, status in statuses.items() if status == UpdateStatus.RUNNING and uid in self.waiters]
        self.near = {uid: seen for uid, seen in self.near.items() if uid in running}
        if any(now - seen < NEAR_END_SECONDS for seen in self.near.values()):
            return FAST_INTERVAL
        asked = [uid for uid in running if uid not in self.near][:NEAR_END_CHECKED]
        if not asked:
            return self.interval
        try:
            near = await asyncio.to_thread(reader.run, lambda conn: updates_near_end(conn, asked))
            self.polls += 1
        except Exception as exc:  # a beat as before: the statuses alone
            log.warning("status watcher: near-end read: %s", (str(exc).splitlines() or [type(exc).__name__])[0][:200])
            return self.interval
        self.near.update({uid: now for uid in near})
        return FAST_INTERVAL if near else self.interval

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
