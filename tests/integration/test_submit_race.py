"""Latest wins, even for submissions a few ms apart (MariaDB): submissions of one prompt
serialize on the prompt's lock row, so the newer always sees, and cancels, the older.
Without it two submissions that ran at once each found nothing to cancel; both were
evaluated, the older was APPLIED and the newer FAILED ("live version is 1, not 0")."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from support.helpers import rules_spec, write_rule_rows

from gate.domain import Gate
from gate.mockllm import MockLLMServer
from gate.states import UpdateStatus
from gate.store.updates import get_update
from workers.supervisor import WorkerProcess

PAIRS = 200
# one pair in ten evaluated (20): the race is at submission, which all 200 pairs go through; by
# evaluation each older update is CANCELLED already, and what the evaluated pairs show (the
# newer goes live, the older never) is the same for 20 as for the 50 of one in four (~7 s of CPU)
EVALUATE_EVERY = 10
LANES = 4


def submit_pair(gate: Gate, name: str, rng: random.Random) -> tuple[int, int]:
    """Two apply-mode submissions of ``name`` released together, each after 0-5 ms;
    returns (older id, newer id)."""
    barrier = threading.Barrier(2)
    delays = [rng.uniform(0, 0.005), rng.uniform(0, 0.005)]

    def one(k: int) -> int:
        barrier.wait()
        time.sleep(delays[k])
        return gate.submit(rules_spec(name, f"candidate {k}"), "apply")

    with ThreadPoolExecutor(2) as pool:
        return tuple(sorted(pool.map(one, range(2))))


def test_near_simultaneous_apply_submissions_the_newest_always_wins(mysql_gate, tmp_path, monkeypatch):
    gate = mysql_gate
    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 2)))
    names = [f"race{i}" for i in range(PAIRS)]
    for name in names:
        gate.map_dataset(name, "d", "1")
    started = time.monotonic()
    # four prompts' pairs at a time: each pair still races only itself (its two submissions
    # released together, 0-5 ms apart, each pair's delays seeded by its index); the lanes are
    # time the database spent waiting on one pair's commits that another pair can use
    with ThreadPoolExecutor(LANES) as lanes:
        pairs = list(lanes.map(lambda k: submit_pair(gate, names[k], random.Random(18_000 + k)), range(PAIRS)))
    submitted = time.monotonic() - started
    # the 400 updates' rows read on one connection (gate.status builds each one's whole report:
    # runs, counts, spend; ~4 s of CPU for the status and reason read here)
    with gate.engine.connect() as conn:
        rows = [(get_update(conn, old), get_update(conn, new)) for old, new in pairs]
    at_submit = Counter((older.status, newer.status) for older, newer in rows)
    print(f"{PAIRS} pairs submitted in {submitted:.1f} s; (older, newer) right after: {dict(at_submit)}")
    assert at_submit == {(UpdateStatus.CANCELLED, UpdateStatus.PENDING): PAIRS}
    assert all(older.reason == f"superseded by update {newer.id}" for older, newer in rows)

    # and evaluated (one pair in ten, for time; the others' newer updates are cancelled):
    # the newest of each pair goes live, the older never does
    evaluated = pairs[::EVALUATE_EVERY]
    for _, new in set(pairs) - set(evaluated):
        gate.cancel(new)
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        fast = Gate(gate.engine, gate.settings.with_(poll_interval=0.01, poll_max_interval=0.05))
        worker = WorkerProcess(
            fast.engine, fast.settings, ["materialize", "execute", "finalize", "reconcile"], 16
        ).start()
        try:
            ended = Counter(
                (gate.status(old).status, gate.wait(new, timeout=120, poll=0.05).status) for old, new in evaluated
            )
        finally:
            worker.shutdown()
    print(f"(older, newer) at the end: {dict(ended)}")
    assert ended == {(UpdateStatus.CANCELLED, UpdateStatus.APPLIED): len(evaluated)}
    assert all(gate.live(name).applied_update_id == new for name, (_, new) in zip(names[::EVALUATE_EVERY], evaluated))
