"""What an applied update's canary rollout did with it (issue 46 point 7): an update APPLIED
with a rollout is judged twice — offline by its bars, then in production by the rollout
worker — and every output says the second verdict once there is one. A canary rolled back
(or ended undecided, the stable version serving again) is not a success: the report's
``outcome`` says so, its badge is not ✅, and `wait` exits 1 (``ROLLOUT_EXIT_CODES``, as
`wait --sha --until promoted` answers).

No database here: ``rollout_summary`` turns the stored rollout (``gate.records.Rollout``)
into the plain dict a report carries (on the wire as it is), the rest reads that dict."""

from __future__ import annotations

from typing import Any

from gate.records import Rollout
from gate.states import ROLLOUT_EXIT_CODES, RolloutStatus, UpdateStatus

RO = RolloutStatus
ENDED_BADLY = frozenset({RO.ROLLED_BACK, RO.UNDECIDED})  # the stable version serves again: not a yes

# the report's outcome, beyond the update's own status, and how each reads
ICONS = {RO.CANARY: "🐤", RO.PROMOTED: "✅", RO.ROLLED_BACK: "↩️", RO.UNDECIDED: "↩️", RO.SUPERSEDED: "⏭️"}
WORDS = {
    RO.CANARY: "applied, canary in progress",
    RO.PROMOTED: "applied and promoted",
    RO.ROLLED_BACK: "applied, then rolled back",
    RO.UNDECIDED: "applied, then undecided: rolled back",
    RO.SUPERSEDED: "applied, canary superseded",
}


# after "APPLIED" in a report's heading
AFTER = {
    RO.CANARY: "canary in progress",
    RO.PROMOTED: "promoted",
    RO.ROLLED_BACK: "then rolled back",
    RO.UNDECIDED: "then undecided, rolled back",
    RO.SUPERSEDED: "canary superseded",
}


def heading(status: str, rollout: dict | None) -> str | None:
    """What follows the status in a heading ("APPLIED, then rolled back"); None: nothing."""
    found = rollout_status(status, rollout)
    return AFTER[found] if found is not None else None


def rollout_summary(rollout: Rollout | None) -> dict[str, Any] | None:
    """The rollout as a report carries it: plain JSON values only (the same read locally
    and over the service)."""
    if rollout is None:
        return None
    figures = rollout.figures or {}
    return {
        "id": rollout.id,
        "status": str(rollout.status),
        "canary_version": rollout.canary_version,
        "stable_version": rollout.stable_version,
        "canary_percent": (rollout.config or {}).get("canary_percent"),
        "canary": _arm(figures.get("canary")),
        "stable": _arm(figures.get("stable")),
        "reason": rollout.reason,
        "decided_at": rollout.decided_at.isoformat() + "Z" if rollout.decided_at else None,
    }


def _arm(arm: Any) -> dict[str, int] | None:
    if not isinstance(arm, dict) or "n" not in arm or "correct" not in arm:
        return None
    return {"n": int(arm["n"]), "correct": int(arm["correct"])}


def rollout_status(status: str, rollout: dict | None) -> RolloutStatus | None:
    """The rollout's state when it speaks for an APPLIED update; None otherwise."""
    if status != UpdateStatus.APPLIED or not rollout:
        return None
    try:
        return RolloutStatus(str(rollout.get("status")))
    except ValueError:
        return None


def outcome(status: str, rollout: dict | None) -> str:
    """The update's status, or for an APPLIED one with a rollout the rollout's state:
    APPLIED (live at 100 %), CANARY, PROMOTED, ROLLED_BACK, UNDECIDED, SUPERSEDED."""
    found = rollout_status(status, rollout)
    return str(found) if found is not None else str(status)


def exit_code(status: str, rollout: dict | None, code: int) -> int:
    """``code`` (the update's own) unless its canary ended rolled back or undecided: then
    `wait --until promoted`'s answer (1). A canary in progress keeps the update's 0."""
    found = rollout_status(status, rollout)
    return ROLLOUT_EXIT_CODES[found] if found in ENDED_BADLY else code


def icon(status: str, rollout: dict | None, default: str) -> str:
    found = rollout_status(status, rollout)
    return ICONS[found] if found is not None else default


def sentence(status: str, rollout: dict | None) -> str | None:
    """One sentence on what production made of it: "applied, then rolled back by rollout 3:
    canary 59.5 % vs stable 91.9 % correct in production; v1 serves again"; None without
    a rollout."""
    found = rollout_status(status, rollout)
    if found is None or rollout is None:
        return None
    rid, stable_v = rollout.get("id"), rollout.get("stable_version")
    if found == RO.CANARY:
        share = rollout.get("canary_percent")
        return f"applied, canary in progress (rollout {rid}, {_num(share)} % of traffic; not yet judged by production)"
    rates = _rates(rollout)
    if found == RO.PROMOTED:
        return f"applied and promoted by rollout {rid}{rates}"
    if found == RO.ROLLED_BACK:
        return f"applied, then rolled back by rollout {rid}{rates}; the stable version v{stable_v} serves again"
    if found == RO.UNDECIDED:
        return (
            f"applied, then rolled back by rollout {rid}, undecided at its time limit{rates}; "
            f"the stable version v{stable_v} serves again"
        )
    return f"applied; its canary (rollout {rid}) was superseded: {rollout.get('reason') or 'see the history'}"


def _rates(rollout: dict) -> str:
    canary, stable = rollout.get("canary"), rollout.get("stable")
    if not canary or not stable:
        return ""
    return f": canary {_pct(canary)} vs stable {_pct(stable)} correct in production"


def _pct(arm: dict) -> str:
    return "n/a (0 outcomes)" if not arm["n"] else f"{arm['correct'] / arm['n'] * 100:.1f} % ({arm['n']:,} outcomes)"


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return "?" if value is None else str(value)
