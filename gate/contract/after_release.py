"""What a release pipeline may wait for once a commit's apply-mode updates have ended
APPLIED, on either gate: `wait --sha SHA --served` (every runtime process that reported in
the last interval serves the version the commit applied: ``wait_until_served``) and `wait
--sha SHA --until promoted` (its canary rollout ended: ``wait_until_rollout_ends``).

Exit codes as `wait`'s: 0 done (served; promoted, or live at 100 % without a rollout), 1 the
version was rolled back (or its rollout rolled back or ended undecided), 2 superseded by
another change, 3 still waiting at the timeout."""

from __future__ import annotations

import time
from collections.abc import Callable

from gate.states import ROLLOUT_EXIT_CODES, UpdateStatus

from .release import combine_exit_codes, deadline_after, expired, time_left

SERVED_POLL = 1.0
ROLLOUT_POLL = 2.0
UNTIL = ("promoted",)


def applied_version(gate, name: str, update_id: int) -> int | None:
    """The version update ``update_id`` made live (None: not among the prompt's history)."""
    return next(
        (
            row["version"]
            for row in gate.history(name, 1000)
            if row.get("update_id") == update_id and row.get("kind", "apply") == "apply"
        ),
        None,
    )


def rolled_back_past(gate, name: str, version: int) -> dict | None:
    """A rollback since ``version`` went live that restored an older one, if any."""
    for row in gate.history(name, 1000):
        if row["version"] <= version:
            return None
        if row.get("kind") == "rollback" and (row.get("restored_version") or 0) < version:
            return row
    return None


def served_state(gate, name: str, version: int, allow_none: bool = False) -> tuple[int | None, str]:
    """(exit code when settled, else None; a line saying where it stands). Only processes
    reported by a token that may run the prompt count (issue 48: a runtime token for it, or a
    runtime on the database), and a line names each by its token, never by text the process
    sent. None counted: 1, saying so (``allow_none``: 0, as before)."""
    back = rolled_back_past(gate, name, version)
    if back is not None:
        return 1, f"{name}: v{version} was rolled back (v{back['version']}: {back.get('reason') or ''})".strip()
    served = gate.served(name)
    behind = [p for p in served["processes"] if p.version < version]
    active = served["active"]
    if not active:
        uncounted = served.get("uncounted") or 0
        line = f"{name}: v{version} is live; no runtime process that may run {name} has reported in the last interval"
        if uncounted:
            line += (
                f" ({uncounted} reported by tokens that may not run it, which do not count: give the fleet a "
                f"runtime token, promptgate token create NAME --scope runtime --prompts {name})"
            )
        if allow_none:
            return 0, line
        return 1, line + "; --allow-none accepts that"
    if not behind:
        return 0, f"{name}: all {active} processes serve v{version} or later"
    who = ", ".join(sorted({f"{p.reported_by}:{p.pid} (v{p.version})" for p in behind})[:5])
    return None, f"{name}: {active - len(behind)} of {active} processes serve v{version}; waiting for {who}"


def wait_until_served(
    gate,
    reports,
    timeout: float | None,
    say: Callable[[str], object] | None = None,
    poll: float = SERVED_POLL,
    allow_none: bool = False,
) -> int:
    """Wait until every active runtime process serves what each APPLIED update made live."""
    deadline = deadline_after(timeout)
    targets = [
        (r.update.prompt_name, applied_version(gate, r.update.prompt_name, r.update.id))
        for r in reports
        if r.status == UpdateStatus.APPLIED
    ]
    codes: dict[str, int] = {}
    said: dict[str, str] = {}
    while True:
        for name, version in targets:
            if name in codes or version is None:
                continue
            code, line = served_state(gate, name, version, allow_none)
            if say is not None and said.get(name) != line:
                say(line)
                said[name] = line
            if code is not None:
                codes[name] = code
        if len(codes) == len([t for t in targets if t[1] is not None]):
            return combine_exit_codes(codes.values())
        if expired(deadline):
            return 3
        time.sleep(time_left(deadline, poll))


def wait_until_rollout_ends(
    gate, reports, timeout: float | None, say: Callable[[str], object] | None = None, poll: float = ROLLOUT_POLL
) -> int:
    """Wait until the canary rollout of each APPLIED update has ended (none: at once)."""
    deadline = deadline_after(timeout)
    open_ids = [r.update.id for r in reports if r.status == UpdateStatus.APPLIED]
    codes: dict[int, int] = {}
    said: dict[int, str] = {}
    while True:
        for update_id in open_ids:
            if update_id in codes:
                continue
            found = gate.rollout_of_update(update_id)
            status = "NONE" if found is None else found["status"]
            if say is not None and said.get(update_id) != status:
                say(_rollout_line(update_id, found))
                said[update_id] = status
            if found is None:
                codes[update_id] = 0
            elif status != "CANARY":
                codes[update_id] = ROLLOUT_EXIT_CODES[found["status"]]  # a RolloutStatus's str, as the service sends it
        if len(codes) == len(open_ids):
            return combine_exit_codes(codes.values())
        if expired(deadline):
            return 3
        time.sleep(time_left(deadline, poll))


def _rollout_line(update_id: int, found: dict | None) -> str:
    if found is None:
        return f"update {update_id}: no canary rollout (live at 100 %)"
    if found["status"] == "CANARY":
        return (
            f"update {update_id}: canary v{found['canary_version']} beside stable v{found['stable_version']}, "
            "waiting for the rollout worker's decision"
        )
    return f"update {update_id}: rollout {found['status']}: {found.get('reason') or ''}".strip()
