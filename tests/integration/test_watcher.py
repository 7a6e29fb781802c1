"""The service's shared status watcher on a real database: a waiter that arrives while
the watcher is closing its connection (no waiter was left) is still woken."""

from __future__ import annotations

import asyncio
import time

from support.helpers import rules_spec, setup_gate

from gate import db
from gate.service.watcher import StatusWatcher


def test_a_waiter_arriving_while_the_watcher_closes_is_woken(gate, tmp_path, monkeypatch):
    setup_gate(gate, tmp_path)
    update_id = gate.submit(rules_spec("p1"), "check")
    gate.cancel(update_id)  # terminal: every wait for it returns at the next beat
    real_close = db.KeptConnection.close

    def slow_close(self):  # the window the race needs, made wide
        time.sleep(0.4)
        real_close(self)

    monkeypatch.setattr(db.KeptConnection, "close", slow_close)

    async def scenario():
        watcher = StatusWatcher(gate.engine, interval=0.05)
        assert await watcher.wait(update_id, 5) == "CANCELLED"
        await asyncio.sleep(0.1)  # the watcher has seen no waiter left and is closing
        started = time.monotonic()
        status = await watcher.wait(update_id, 3)
        return status, time.monotonic() - started

    status, waited = asyncio.run(scenario())
    assert status == "CANCELLED" and waited < 1.0, f"woken after {waited:.2f} s ({status})"


def test_a_waiter_whose_read_fails_never_keeps_the_others_from_waking(gate, tmp_path):
    """An id no query can take (past BIGINT: SQLite cannot bind it; the API refuses it with
    a 404 before it gets here) registered directly: the beat's IN query fails, yet the
    good waiter wakes at the next beat and the bad one is woken as unknown."""
    setup_gate(gate, tmp_path)
    update_id = gate.submit(rules_spec("p1"), "check")

    async def scenario():
        watcher = StatusWatcher(gate.engine, interval=0.05)
        bad = asyncio.get_running_loop().create_future()
        watcher.waiters[2**64] = {bad: None}  # as an unchecked caller would have left it
        good = asyncio.create_task(watcher.wait(update_id, 10))
        await asyncio.sleep(0.3)  # beats with both ids
        await asyncio.to_thread(gate.cancel, update_id)
        started = time.monotonic()
        status = await good
        return status, time.monotonic() - started, bad.done() and bad.result(), watcher.task.done()

    status, waited, bad_status, _ = asyncio.run(scenario())
    assert status == "CANCELLED" and waited < 2.0, f"woken after {waited:.2f} s ({status})"
    assert bad_status == "UNKNOWN"
