"""The executor's loop waits when it has no room: with an instant model (or an apply whose
every answer is reused) the claimed items pile up behind their write-backs, and a loop that
polled again at once while they wait would spin a core and starve the write-back threads
of the GIL. A poll either claims a chunk or waits (for room, for work) — so the number of
polls is bounded by the chunks claimed plus the waits of the run's wall time."""

from __future__ import annotations

import time

from support.helpers import rules_spec, write_rule_rows

from gate.calls.llm import CallResult
from gate.domain import Gate
from workers.execute.executor import Executor
from workers.supervisor import run_until_terminal

ITEMS, CHUNK, CONCURRENCY = 3000, 64, 8
WAIT = 0.05  # the executor's longest wait for room (``workers.execute.ledger.ROOM_WAIT``)


def instant(spec, item, settings=None, **_):
    label = "yes" if "alpha" in item["text"] else "no"
    return CallResult(decision=label, valid=True, raw_output=label, latency_ms=0, prompt_tokens=1, completion_tokens=1)


def test_an_executor_whose_items_wait_for_their_write_back_does_not_spin(mysql_gate, tmp_path, monkeypatch):
    polls = []
    original = Executor.poll

    def counted(self):
        delay = original(self)
        polls.append(delay)
        return delay

    monkeypatch.setattr(Executor, "poll", counted)
    gate = Gate(mysql_gate.engine, mysql_gate.settings.with_(chunk_size=CHUNK))
    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", ITEMS)))
    gate.map_dataset("p1", "d", "0.5")
    uid = gate.submit(rules_spec(), "check")  # reuse on: every chunk keeps its answers too
    started = time.monotonic()
    (report,) = run_until_terminal(gate, [uid], timeout=120, concurrency=CONCURRENCY, call=instant)
    wall = time.monotonic() - started
    assert report.status == "PASSED", report.reason
    chunks = -(-ITEMS // CHUNK)
    # each poll claims a chunk, or waits for room: until a chunk's calls answer or its
    # write-back ends (a few wakes per chunk), or WAIT passes; or it sleeps its idle delay.
    # A loop that polls again at once instead makes ~100,000 polls a second.
    bound = 3 * chunks + 2 * wall / WAIT + 20
    assert len(polls) <= bound, (
        f"{len(polls)} polls in {wall:.2f} s for {chunks} chunks (at most {bound:.0f}): "
        f"{sum(1 for d in polls if d == 0)} returned no delay"
    )
