"""An admin's acceptance of a first version without a judge (`submit --accept-unjudged`,
issue 46.1): a compared prompt (``compare: live``) with no live version has nothing to be
compared with, so no bar can judge it; a team with no graded judge for it (``first:``) may
still ship it, explicitly. The update is staged and run as any (its answers are kept, so the
next version is compared with them; the bars a run computes without a judge — errors,
latency, cost — still hold), and ends APPLIED *not judged*
(``gate.verdict.update_outcome.update_end``, ``accepted``), which every output says with ☑️,
never ✅, and `wait` exits 5 (``gate.states.EXIT_NOT_JUDGED``).

Authority is checked here as well as at the route: only an admin token (or the CLI on the
database, the operator) may accept, only in apply mode, only a first version of a kind whose
first version cannot be judged, and not one whose prompt names a judge for it (``first:``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gate.errors import Forbidden, UsageError
from gate.kinds import kind_of
from gate.states import Mode
from gate.store.live import live_version
from gate.verdict.update_outcome import ACCEPTED_UNJUDGED

if TYPE_CHECKING:
    from gate.prompt.spec import PromptSpec

SOURCE_KEY = ACCEPTED_UNJUDGED  # the update's source says so (set by submit only)


def check_accept(conn, spec: PromptSpec, mode: str, scope: str | None) -> None:
    """Refuse, in one line, an acceptance the caller may not make or the candidate cannot
    take (``scope``: the service token's; None: the CLI on the database). Under the prompt's
    lock: a version applied meanwhile fails this update's apply (its base version)."""
    if scope is not None and scope != "admin":
        raise Forbidden("--accept-unjudged needs an admin token: it applies a version no bar judged")
    if mode != Mode.APPLY:
        raise UsageError("--accept-unjudged accepts a first version to go live: submit it with --mode apply")
    kind = kind_of(spec.decision)
    if not kind.first_unjudged:
        raise UsageError(
            f"prompt {spec.name} can be judged by its bars: --accept-unjudged is only for the first version of a "
            "compared prompt (decision compare: live)"
        )
    if kind.first_version(spec.decision) is not None:
        raise UsageError(
            f"prompt {spec.name} names a judge for its first version (decision first:): it is graded by it; "
            "--accept-unjudged is for a compared prompt without one"
        )
    version = live_version(conn, spec.name)
    if version:
        raise UsageError(
            f"prompt {spec.name} has live version v{version}: it is compared with it; --accept-unjudged is only "
            "for a first version"
        )
