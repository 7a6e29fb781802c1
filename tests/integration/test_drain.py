"""A draining worker gives back what it has not started (MariaDB, real worker processes, the
local model server): the claimed items whose call has not begun and a materialize run
lease, guarded by their lease tokens, so a rolling deploy does not stall open runs by up
to a lease."""

from __future__ import annotations

import signal
import threading
import time

from sqlalchemy import func, select
from support.helpers import rules_spec, write_rule_rows
from support.workers_harness import WorkerFleet, worker_env

from gate.mockllm import MockLLMServer
from gate.states import UpdateStatus, Verdict
from gate.store.runs import claim_materialize
from gate.store.schema import prompt_run_item
from workers.materialize import Materializer

LEASE = 60
LATENCY_MS = 2000


def held_items(gate, run_id: int) -> int:
    i = prompt_run_item
    with gate.engine.connect() as conn:
        return conn.execute(select(func.count()).where(i.c.run_id == run_id, i.c.lease_token.is_not(None))).scalar()


def test_sigterm_gives_back_the_items_not_yet_called(mysql_gate, tmp_path):
    """The first worker holds a chunk of 8, one call in flight; SIGTERMed, it finishes that
    call and gives the other 7 back, which a second worker takes at once: the first exits
    after its one call, the run ends long before the first one's 60 s lease would have
    expired, and no item is called twice. (Calling its whole queue itself, one at a time,
    took the first worker past its drain deadline, and what it had not reached waited out
    the lease.)"""
    gate = mysql_gate
    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 24)))
    gate.map_dataset("p1", "d", "1")
    with MockLLMServer(latency_ms=LATENCY_MS) as llm:
        env = worker_env(gate.settings.database_url, llm.base_url, lease_seconds=LEASE, request_timeout=3, chunk_size=8)
        first = WorkerFleet({**env, "PROMPTGATE_CONCURRENCY": "1"}, tmp_path)
        second = WorkerFleet({**env, "PROMPTGATE_CONCURRENCY": "8"}, tmp_path)
        try:
            (proc,) = first.start(1)
            uid = gate.submit(rules_spec("p1"), "apply")
            deadline = time.monotonic() + 60
            while llm.stats()["in_flight"] < 1 and time.monotonic() < deadline:
                time.sleep(0.02)
            run_id = gate.status(uid).runs[0].run_id
            assert held_items(gate, run_id) == 8  # 1 calling, 7 waiting behind it
            stopped = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            second.start(1)
            proc.wait(30)
            drained, exited = proc.returncode, time.monotonic() - stopped
            report = gate.wait(uid, timeout=LEASE / 2)
            ended = time.monotonic() - stopped
            calls = llm.stats()["requests"]
        finally:
            first.stop_all()
            second.stop_all()
    print(
        f"SIGTERM: the worker exited after {exited:.1f} s, the run ended after {ended:.1f} s (lease {LEASE} s, "
        f"calls {LATENCY_MS} ms); calls {calls}"
    )
    assert report.status == UpdateStatus.APPLIED, (report.status, report.update.reason)
    assert drained == 0 and exited < LATENCY_MS / 1000 + 4  # its one call, not its whole queue
    assert ended < LEASE / 2
    assert calls == 24  # nothing given back was called as well
    i = prompt_run_item
    with gate.engine.connect() as conn:
        rows = conn.execute(select(i.c.verdict, i.c.attempt).where(i.c.run_id == run_id)).all()
    assert {(r.verdict, r.attempt) for r in rows} == {(Verdict.MATCH, 1)}  # a give-back is not an attempt


def test_a_draining_materializer_gives_its_run_lease_back(mysql_gate, tmp_path):
    """Stopped before its first page is written, the materializer releases the run at once:
    another worker claims it now, not after the lease."""
    gate = mysql_gate
    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 300)))
    gate.map_dataset("p1", "d", "1")
    uid = gate.submit(rules_spec("p1"), "apply")
    stop = threading.Event()
    stop.set()  # draining already: it stops at its first page
    Materializer(gate.engine, gate.settings, stop).poll()
    run = gate.status(uid).runs[0]
    with gate.engine.begin() as conn:
        claimed = claim_materialize(conn, gate.settings.lease_seconds, 1)
    assert [r.id for r, _ in claimed] == [run.run_id], "the run stayed leased to the stopped worker"
