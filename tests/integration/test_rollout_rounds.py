"""The rollout worker looks at every canary rollout in progress, however many there are, and
rests between rounds (review of issue 39's round). It read the oldest ``BATCH`` (50) each
time and, when it got a full page, looked again at once: with more than 50 prompts in a
canary, the 51st and later were never looked at while the first 50 stayed undecided (up to
their ``max_hours``), and the worker read and decided the same 50 without a pause."""

from __future__ import annotations

import threading

from gate.db import transaction
from gate.settings import Settings
from gate.states import RolloutStatus
from gate.store.feedback import record_feedback
from gate.store.live_requests import canary_request
from gate.store.locks import ensure_prompt_lock
from gate.store.rollouts import get_rollout, start_rollout
from workers.rollout import BATCH, RolloutWorker

UNDECIDED_YET = {"canary_percent": 10, "min_feedback": 1000, "max_drop": 0.02, "confidence": 0.95, "max_hours": 48}


def canary(engine, name: str, update_id: int, outcomes: int = 0) -> int:
    """A rollout of ``name`` (started by update ``update_id``) in CANARY with ``outcomes``
    answers on each version: the canary's right, the stable version's wrong."""
    transaction(engine, lambda conn: ensure_prompt_lock(conn, name))

    def start(conn) -> int:
        rollout_id = start_rollout(conn, name, update_id, 2, 1, UNDECIDED_YET)
        told = [(f"{arm}{i}", arm == "c", arm == "c") for arm in "cs" for i in range(outcomes)]
        if told:
            record_feedback(conn, rollout_id, told, 0)
        return rollout_id

    return transaction(engine, start)


def test_a_rollout_past_the_first_page_is_decided_and_the_worker_rests(gate):
    engine = gate.engine
    waiting = [canary(engine, f"p{i}", i + 1) for i in range(BATCH + 10)]  # no feedback: each stays in CANARY
    decidable = canary(engine, "last", BATCH + 11, outcomes=1000)  # the canary far better: promoted when looked at
    worker = RolloutWorker(engine, Settings(rollout_interval=0.5), threading.Event())
    delays = [worker.poll() for _ in range(3)]
    with engine.connect() as conn:  # decided: its request waits for the reconcile step (issue 47)
        assert canary_request(conn, decidable).decision == RolloutStatus.PROMOTED
        assert all(get_rollout(conn, r).status == RolloutStatus.CANARY for r in waiting)
    assert delays == [0.0, 0.5, 0.0]  # a full page, then the rest and a pause; then the next round
