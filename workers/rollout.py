"""The rollout worker, the fifth role: it decides canary rollouts (``gate.rollout.rule``).

Why a role of its own and not reconcile's second duty: its work is driven by time and by
production's feedback, long after every update is finished, while reconcile's is driven by
open updates and sleeps on the shared "any open update?" probe (``workers.poller.Activity``)
when there is none. So it polls on its own clock (``PROMPTGATE_ROLLOUT_INTERVAL``, 2 s), one
indexed read of the rollouts in CANARY when there is none, and it is the only one to ask
for a rollout's decision (``store.live_requests.request_canary_decision``); the reconcile
step carries it out, as it does every change of the live row.

A look at a rollout reads its tally (a few rows) and the hours since it started (the
database's clock) and applies the rule. A decision is one transaction, in the lock order of
a rollback: the prompt's lock, then the rollout's row (SKIP LOCKED: another worker deciding
it is skipped) with its status checked and the tally read again under it, then **a request**
(``live_request``, one per rollout) for the reconcile step, the one writer of the live table
(``gate.store.live_transition``): it ends the rollout PROMOTED, ROLLED_BACK or UNDECIDED, and
for the last two makes the stable version's config live again as a new version (a rollback
by the rollout worker in the prompt's history, with the figures), holds the canary's config
(ROLLED_BACK always, UNDECIDED with ``hold_undecided``) and cancels the open apply-mode
updates, all in one transaction. Until then the rollout stays CANARY: production routes it
as before. A worker killed mid-decision leaves its transaction uncommitted: the rollout
stays in CANARY with its feedback and the next look decides again."""

from __future__ import annotations

import logging

from gate.db import transaction
from gate.rollout.rule import Decision, RolloutConfig, decide
from gate.rollout.sequence import Arm
from gate.states import RolloutStatus
from gate.store.feedback import read_tally
from gate.store.live_requests import canary_request, request_canary_decision
from gate.store.locks import lock_prompt
from gate.store.rollouts import canary_rollouts, get_rollout, lock_rollout, rollout_hours
from workers.poller import Poller

log = logging.getLogger("promptgate.rollout")
BATCH = 50


class RolloutWorker(Poller):
    """Looks at the rollouts in CANARY a page of ``BATCH`` at a time, each page after the
    last one's ids, and sleeps ``rollout_interval`` once it has looked at them all: every
    rollout is looked at once a round, however many there are (a page read from the
    oldest each time would look at the same ``BATCH`` again and again, without a pause)."""

    role = "rollout"
    after = 0  # the last id of the page looked at; 0: a round starts from the oldest

    def poll(self) -> float:
        with self.engine.connect() as conn:
            ids = canary_rollouts(conn, BATCH, self.after)
        for rollout_id in ids:
            if self.stop.is_set():
                break
            if look(self.engine, rollout_id) not in (None, RolloutStatus.CANARY):
                self.nudge("reconcile")  # its request: carried out now by this process's reconcile step
        if len(ids) == BATCH:
            self.after = ids[-1]
            return 0.0
        self.after = 0
        return self.settings.rollout_interval


def look(engine, rollout_id: int) -> RolloutStatus | None:
    """Look at one rollout: decide it when the rule says so. Returns the step taken
    (CANARY: held), None when it was no longer in CANARY."""
    with engine.connect() as conn:
        found = get_rollout(conn, rollout_id)
        if found is None or found.status != RolloutStatus.CANARY or canary_request(conn, rollout_id) is not None:
            return None  # decided, or its decision waits for the reconcile step
        decision = judge(conn, found, rollout_hours(conn, rollout_id))
    if decision.status == RolloutStatus.CANARY:
        return RolloutStatus.CANARY
    decided = transaction(engine, lambda conn: decide_under_lock(conn, found.prompt_name, rollout_id))
    return decided


def judge(conn, rollout, hours: float) -> Decision:
    tally = read_tally(conn, rollout.id)
    return decide(RolloutConfig.from_json(rollout.config), Arm(*tally["canary"]), Arm(*tally["stable"]), hours)


def decide_under_lock(conn, prompt_name: str, rollout_id: int) -> RolloutStatus | None:
    """The decision's transaction (see the module docstring): the decision becomes a request
    for the reconcile step, which alone moves the live row and ends the rollout. Returns the
    decision (CANARY: held), None when the rollout is no longer in CANARY, is locked
    elsewhere, or has its request already."""
    lock_prompt(conn, prompt_name)
    locked = lock_rollout(conn, rollout_id)
    if locked is None:
        return None  # decided, superseded, or being decided by another worker
    rollout, hours = locked
    decision = judge(conn, rollout, hours)
    if decision.status == RolloutStatus.CANARY:
        return RolloutStatus.CANARY
    target = rollout.canary_version if decision.status == RolloutStatus.PROMOTED else rollout.stable_version
    asked = request_canary_decision(
        conn,
        prompt_name,
        rollout_id,
        rollout.canary_version,
        target,
        decision.status,
        decision.figures,
        decision.reason,
    )
    if asked is None:
        return None  # its request is waiting for the reconcile step already
    log.info("rollout %s of %s: %s asked (%s)", rollout_id, prompt_name, decision.status, decision.reason)
    return decision.status
