"""The rollout worker, the fifth role: it decides canary rollouts (``gate.rollout.rule``).

Why a role of its own and not reconcile's second duty: its work is driven by time and by
production's feedback, long after every update is finished, while reconcile's is driven by
open updates and sleeps on the shared "any open update?" probe (``workers.poller.Activity``)
when there is none. So it polls on its own clock (``PROMPTGATE_ROLLOUT_INTERVAL``, 2 s), one
indexed read of the rollouts in CANARY when there is none, and it is the only writer of a
rollout's decision (``store.rollouts.end_rollout``); reconcile keeps the apply.

A look at a rollout reads its tally (a few rows) and the hours since it started (the
database's clock) and applies the rule. A decision is one transaction, in the lock order of
a rollback: the prompt's lock, then the rollout's row (SKIP LOCKED: another worker deciding
it is skipped) with its status checked and the tally read again under it, then the step,
guarded by the status: PROMOTED (the canary, already the live version, serves every call);
ROLLED_BACK or UNDECIDED (the stable version's config live again as a new version, recorded
in the prompt's history as a rollback by the rollout worker with the figures, guarded by
the live version still being the canary; open apply-mode updates, judged against the
canary, cancelled). A worker killed mid-decision leaves its transaction uncommitted: the
rollout stays in CANARY with its feedback and the next look decides again."""

from __future__ import annotations

import logging

from gate.db import transaction
from gate.rollout.rule import Decision, RolloutConfig, decide
from gate.rollout.sequence import Arm
from gate.states import Mode, RolloutStatus
from gate.store.feedback import read_tally
from gate.store.live import restore_live
from gate.store.locks import lock_prompt
from gate.store.rollouts import canary_rollouts, end_rollout, get_rollout, lock_rollout, rollout_hours
from gate.store.updates import cancel_update, superseded_updates
from workers.poller import Poller

log = logging.getLogger("promptgate.rollout")
BATCH = 50
ACTOR = "rollout worker"


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
            look(self.engine, rollout_id)
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
        if found is None or found.status != RolloutStatus.CANARY:
            return None
        decision = judge(conn, found, rollout_hours(conn, rollout_id))
    if decision.status == RolloutStatus.CANARY:
        return RolloutStatus.CANARY
    return transaction(engine, lambda conn: decide_under_lock(conn, found.prompt_name, rollout_id))


def judge(conn, rollout, hours: float) -> Decision:
    tally = read_tally(conn, rollout.id)
    return decide(RolloutConfig.from_json(rollout.config), Arm(*tally["canary"]), Arm(*tally["stable"]), hours)


def decide_under_lock(conn, prompt_name: str, rollout_id: int) -> RolloutStatus | None:
    """The decision's transaction (see the module docstring)."""
    lock_prompt(conn, prompt_name)
    locked = lock_rollout(conn, rollout_id)
    if locked is None:
        return None  # decided, superseded, or being decided by another worker
    rollout, hours = locked
    decision = judge(conn, rollout, hours)
    if decision.status == RolloutStatus.CANARY:
        return RolloutStatus.CANARY
    end_rollout(conn, rollout_id, decision.status, decision.figures, decision.reason)
    if decision.status != RolloutStatus.PROMOTED:
        restore_stable(conn, rollout, decision)
    log.info("rollout %s of %s: %s (%s)", rollout_id, prompt_name, decision.status, decision.reason)
    return decision.status


def restore_stable(conn, rollout, decision: Decision) -> int:
    """The stable version's config live again as a new version, and the prompt's open
    apply-mode updates cancelled (they were judged against the canary)."""
    why = f"canary v{rollout.canary_version} {decision.status.lower().replace('_', ' ')}: {decision.reason}"
    version = restore_live(conn, rollout.prompt_name, rollout.canary_version, rollout.stable_version, ACTOR, why)
    for update_id in superseded_updates(conn, rollout.prompt_name, Mode.APPLY, None):
        cancel_update(
            conn,
            update_id,
            f"cancelled: the canary of prompt {rollout.prompt_name} ended {decision.status} and version "
            f"{rollout.stable_version}'s config is live again as version {version}; this update was judged "
            f"against version {rollout.canary_version}",
        )
    return version
