"""The state machines (docs/architecture.md), as data. ``gate.store`` turns each allowed step into
one conditional UPDATE and checks its row count; everything else asks this module."""

from __future__ import annotations

from enum import StrEnum

from gate.errors import IllegalTransition


class Mode(StrEnum):
    CHECK = "check"
    APPLY = "apply"


class UpdateStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    APPLIED = "APPLIED"
    PASSED = "PASSED"
    REJECTED = "REJECTED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


class RunStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    DONE = "DONE"
    ERROR = "ERROR"
    CANCELLED = "CANCELLED"


class Verdict(StrEnum):
    PENDING = "PENDING"
    MATCH = "MATCH"
    MISMATCH = "MISMATCH"
    ERROR = "ERROR"
    STOPPED = "STOPPED"  # never called: its run stopped first (early stop, spend cap); not an answer


U, R = UpdateStatus, RunStatus

UPDATE_STEPS: dict[UpdateStatus, frozenset[UpdateStatus]] = {
    U.RUNNING: frozenset({U.PENDING}),
    U.APPLIED: frozenset({U.RUNNING}),
    U.PASSED: frozenset({U.RUNNING}),
    U.REJECTED: frozenset({U.RUNNING}),
    U.FAILED: frozenset({U.RUNNING}),
    U.CANCELLED: frozenset({U.PENDING, U.RUNNING}),
}
RUN_STEPS: dict[RunStatus, frozenset[RunStatus]] = {
    R.RUNNING: frozenset({R.PENDING}),
    R.DONE: frozenset({R.RUNNING}),
    R.ERROR: frozenset({R.RUNNING}),
    R.CANCELLED: frozenset({R.PENDING, R.RUNNING}),
}
# a judged run's sentinel (gate.store.sentinels): judged once, by the write-back of the item it rides on
SENTINEL_STEPS: dict[Verdict, frozenset[Verdict]] = {
    Verdict.MATCH: frozenset({Verdict.PENDING}),  # the judge agreed with the humans
    Verdict.MISMATCH: frozenset({Verdict.PENDING}),
    Verdict.ERROR: frozenset({Verdict.PENDING}),  # the judge gave no answer, for good: counts against it
}
UPDATE_TERMINAL = frozenset({U.APPLIED, U.PASSED, U.REJECTED, U.FAILED, U.CANCELLED})
RUN_TERMINAL = frozenset({R.DONE, R.ERROR, R.CANCELLED})
UPDATE_OPEN = frozenset({U.PENDING, U.RUNNING})
RUN_OPEN = frozenset({R.PENDING, R.RUNNING})

# Exit codes of `promptgate wait` / `status`: 0 cleared, 1 rejected, 2 failed or cancelled, 3 still open.
EXIT_CODES = {U.APPLIED: 0, U.PASSED: 0, U.REJECTED: 1, U.FAILED: 2, U.CANCELLED: 2, U.PENDING: 3, U.RUNNING: 3}
# An update APPLIED without a judge, accepted by an admin (`submit --accept-unjudged`, issue 46.1):
# live, but no bar judged it; `wait` / `status` exit 5 so a release pipeline can tell it from a
# verdict (0 only with `wait --accept-unjudged`).
EXIT_NOT_JUDGED = 5


def update_sources(to: UpdateStatus) -> frozenset[UpdateStatus]:
    """The states an update may move to ``to`` from; an illegal target raises."""
    try:
        return UPDATE_STEPS[UpdateStatus(to)]
    except (KeyError, ValueError):
        raise IllegalTransition(f"no update ever moves to {to}") from None


def sentinel_sources(to: Verdict) -> frozenset[Verdict]:
    try:
        return SENTINEL_STEPS[Verdict(to)]
    except (KeyError, ValueError):
        raise IllegalTransition(f"no sentinel ever moves to {to}") from None


def run_sources(to: RunStatus) -> frozenset[RunStatus]:
    try:
        return RUN_STEPS[RunStatus(to)]
    except (KeyError, ValueError):
        raise IllegalTransition(f"no run ever moves to {to}") from None


class RolloutStatus(StrEnum):
    """A canary rollout (docs/architecture.md, "State machines"): the applied version serves
    ``canary_percent`` of calls beside the stable one until the rollout worker decides."""

    CANARY = "CANARY"
    PROMOTED = "PROMOTED"  # non-inferiority shown: the canary is the stable version
    ROLLED_BACK = "ROLLED_BACK"  # inferiority shown: the stable version's config is live again
    UNDECIDED = "UNDECIDED"  # max_hours passed, neither shown: the stable version serves
    SUPERSEDED = "SUPERSEDED"  # an apply or a rollback during the canary ended it first


RO = RolloutStatus
ROLLOUT_STEPS: dict[RolloutStatus, frozenset[RolloutStatus]] = {
    RO.PROMOTED: frozenset({RO.CANARY}),
    RO.ROLLED_BACK: frozenset({RO.CANARY}),
    RO.UNDECIDED: frozenset({RO.CANARY}),
    RO.SUPERSEDED: frozenset({RO.CANARY}),
}
ROLLOUT_TERMINAL = frozenset({RO.PROMOTED, RO.ROLLED_BACK, RO.UNDECIDED, RO.SUPERSEDED})
# `wait --sha --until promoted`: 0 promoted, 1 rolled back or undecided, 2 superseded, 3 still a canary
ROLLOUT_EXIT_CODES = {RO.PROMOTED: 0, RO.ROLLED_BACK: 1, RO.UNDECIDED: 1, RO.SUPERSEDED: 2, RO.CANARY: 3}


def rollout_sources(to: RolloutStatus) -> frozenset[RolloutStatus]:
    try:
        return ROLLOUT_STEPS[RolloutStatus(to)]
    except (KeyError, ValueError):
        raise IllegalTransition(f"no rollout ever moves to {to}") from None


class LiveRequestStatus(StrEnum):
    """A request to change the live row (``live_request``: a person's rollback, a canary's
    decision), carried out by the reconcile step (``gate.domain.live_transition``) in one
    transaction with the live row, its history row and its hold."""

    PENDING = "PENDING"  # asked for: the live row unchanged, a canary still CANARY
    DONE = "DONE"  # carried out: the live row, its history (and hold) written with it
    REFUSED = "REFUSED"  # a guard failed (the live version moved on since the request saw it, ...): nothing changed


LR = LiveRequestStatus
LIVE_REQUEST_STEPS: dict[LiveRequestStatus, frozenset[LiveRequestStatus]] = {
    LR.DONE: frozenset({LR.PENDING}),
    LR.REFUSED: frozenset({LR.PENDING}),
}
LIVE_REQUEST_TERMINAL = frozenset({LR.DONE, LR.REFUSED})


def live_request_sources(to: LiveRequestStatus) -> frozenset[LiveRequestStatus]:
    try:
        return LIVE_REQUEST_STEPS[LiveRequestStatus(to)]
    except (KeyError, ValueError):
        raise IllegalTransition(f"no live request ever moves to {to}") from None
