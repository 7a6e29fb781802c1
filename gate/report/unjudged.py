"""An update an admin accepted without a judge (`submit --accept-unjudged`, issue 46.1,
gate/domain/unjudged.py): the first version of a compared prompt, which nothing could be
compared with, applied by an admin's choice. It is live, but no bar judged it, and every
output says so — ☑️ "not judged", never ✅: its ``outcome`` is ``NOT_JUDGED`` (the status
stays APPLIED), its bars that could not be judged read "not judged" (never a pass or a fail;
they never count), and `wait` / `status` exit 5 (``gate.states.EXIT_NOT_JUDGED``).

No database here: it reads the update's record (its ``source`` says it was accepted)."""

from __future__ import annotations

from typing import Any

from gate.records import Update
from gate.states import UpdateStatus
from gate.verdict.update_outcome import ACCEPTED_UNJUDGED, NOT_JUDGED, UNJUDGED

OUTCOME = "NOT_JUDGED"  # the report's outcome of an update APPLIED so
ICON = "☑️"  # never ✅: nothing judged it
STATE = NOT_JUDGED  # a check's state: the bar was not judged, and was accepted so
WORDS = "applied, not judged"


def accepted(update: Update) -> bool:
    """An admin accepted the update unjudged (whatever became of it)."""
    return bool((update.source or {}).get(ACCEPTED_UNJUDGED))


def not_judged(update: Update) -> bool:
    """The update is APPLIED, accepted unjudged: live, with no verdict behind it."""
    return update.status == UpdateStatus.APPLIED and accepted(update)


def sentence(update: Update) -> str | None:
    """One sentence on an update APPLIED not judged; None for any other."""
    if not not_judged(update):
        return None
    who = (update.source or {}).get("submitted_by")
    by = f"by admin token {who}" if who else "by an admin (the CLI on the database)"
    return (
        f"applied, not judged: accepted {by} without a judge — a compared prompt's first version has no live "
        "version to compare with, so no bar judged it; the next version is compared with it"
    )


def shown_checks(checks: list[dict[str, Any]], was_accepted: bool) -> list[dict[str, Any]]:
    """A run's checks as shown: those that could not be judged read "not judged" once an admin
    accepted the update so (still failing ones otherwise)."""
    if not was_accepted:
        return checks
    return [{**c, "state": STATE} if c.get("reason") == UNJUDGED else c for c in checks]
