"""The service's shared status watcher on a real database: a waiter that arrives while
the watcher is closing its connection (no waiter was left) is still woken."""

from __future__ import annotations

import asyncio
import time

from gate import db
from gate.server.watcher import StatusWatcher
from helpers import rules_spec, setup_gate


def test_a_waiter_arriving_while_the_watcher_closes_is_woken(gate, tmp_path, monkeypatch):
    setup_gate(gate, tmp_path)
    update_id = gate.submit(rules_spec("p1"), "check")
    gate.cancel(update_id)                       # terminal: every wait for it returns at the next beat
    real_close = db.KeptConnection.close

    def slow_close(self):                        # the window the race needs, made wide
        time.sleep(0.4)
        real_close(self)
    monkeypatch.setattr(db.KeptConnection, "close", slow_close)

    async def scenario():
        watcher = StatusWatcher(gate.engine, interval=0.05)
        assert await watcher.wait(update_id, 5) == "CANCELLED"
        await asyncio.sleep(0.1)                 # the watcher has seen no waiter left and is closing
        started = time.monotonic()
        status = await watcher.wait(update_id, 3)
        return status, time.monotonic() - started

    status, waited = asyncio.run(scenario())
    assert status == "CANCELLED" and waited < 1.0, f"woken after {waited:.2f} s ({status})"
