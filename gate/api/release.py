"""What a release wait (`wait --sha`, ``GET /v1/updates?sha=...&mode=...``) answers for, and
the wait itself (``wait_for_release``): one rule and one loop, run by ``Gate.wait_for_sha``
and ``RemoteGate.wait_for_sha`` alike, so the database and the service can never disagree
on it.

A commit may carry apply-mode updates (the default branch's job: what goes live) and
check-mode ones (a pull request's check, any submit token's). A release pipeline asks
whether the commit went live, so **a check never stands in for an apply**: ``apply`` (the
default) answers for the commit's apply-mode updates only, waiting for one to appear;
``check`` for its check-mode ones only (a team that gates with checks alone asks so);
``auto`` for its apply-mode updates when it has any, else its check-mode ones, saying
which. ``auto`` is not the default: between a merge and the push job's apply, any submit
token's check for the commit (its SHA and content the caller's choice) would answer."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from gate.errors import NotFound, UsageError
from gate.records import Update
from gate.states import Mode

if TYPE_CHECKING:
    from gate.report.update import UpdateReport

RELEASE_MODES = ("auto", "apply", "check")
DEFAULT_RELEASE_MODE = "apply"
SHA_RE = re.compile(r"[0-9a-fA-F]{7,64}")  # what `wait --sha` accepts as a commit
SHA_POLL = 0.5  # seconds between two look-ups of a commit's updates before any appears


def combine_exit_codes(codes: Iterable[int]) -> int:
    """Several updates' exit codes as one: 2 (failed, cancelled, invalid) before 1
    (rejected) before 3 (still open) before 0."""
    codes = set(codes)
    for code in (2, 1, 3):
        if code in codes:
            return code
    return 0


def latest_per_prompt(updates: Iterable[Update]) -> list[Update]:
    """The newest update of each prompt (a re-run's submission replaces the earlier one),
    oldest first."""
    latest: dict[str, Update] = {}
    for u in updates:
        if u.prompt_name not in latest or u.id > latest[u.prompt_name].id:
            latest[u.prompt_name] = u
    return sorted(latest.values(), key=lambda u: u.id)


def check_release_mode(mode: str | None) -> str:
    mode = mode or DEFAULT_RELEASE_MODE
    if mode not in RELEASE_MODES:
        raise UsageError(f"mode {str(mode)[:40]!r} is not auto, apply or check")
    return mode


def of_mode(updates: Iterable[Update], mode: str | None) -> tuple[str | None, list[Update]]:
    """(the mode answered for, the updates of that mode): ``auto`` is apply when any update
    is in apply mode, else check (None: no update at all yet)."""
    updates = list(updates)
    mode = check_release_mode(mode)
    if mode == "auto":
        if not updates:
            return None, []
        mode = Mode.APPLY if any(u.mode == Mode.APPLY for u in updates) else Mode.CHECK
    return str(mode), [u for u in updates if u.mode == mode]


def release_updates(
    updates: Iterable[Update], mode: str | None = DEFAULT_RELEASE_MODE
) -> tuple[str | None, list[Update]]:
    """What a release wait answers for: the newest update per prompt of the mode ``of_mode``
    chooses."""
    chosen, found = of_mode(updates, mode)
    return chosen, latest_per_prompt(found)


def no_update(sha: str, prompt: str | None, mode: str | None) -> NotFound:
    """The one line when the commit has no update the wait may answer for."""
    what = f" for prompt {prompt}" if prompt else ""
    mode = check_release_mode(mode)
    kind = "" if mode == "auto" else f"{mode}-mode "
    hint = "; `--mode check` answers for its checks" if mode == Mode.APPLY else ""
    return NotFound(
        f"no {kind}update was submitted for commit {sha}{what} (wait needs the full SHA the "
        f"Action or `promptgate submit --sha` used{hint})"
    )


class Announcer:
    """Says once (and again if it changes) which updates a wait answers for, through
    ``say`` (the CLI: a line on stderr)."""

    def __init__(self, sha: str, requested: str | None, say: Callable[[str], object] | None):
        self.sha, self.requested, self.say = sha, check_release_mode(requested), say
        self.said: str | None = None

    def __call__(self, chosen: str | None) -> None:
        if self.say is None or chosen is None or chosen == self.said:
            return
        self.said = chosen
        why = (
            ""
            if self.requested != "auto"
            else " (it has no apply-mode update; `--mode apply` waits for one)"
            if chosen == Mode.CHECK
            else ""
        )
        self.say(f"commit {self.sha[:12]}: waiting for its {chosen}-mode updates{why}")


# --- the wait ------------------------------------------------------------------------------


def deadline_after(timeout: float | None) -> float | None:
    """The monotonic time ``timeout`` seconds from now (None: no deadline)."""
    return None if timeout is None else time.monotonic() + max(0.0, timeout)


def time_left(deadline: float | None, most: float) -> float:
    """Seconds to the deadline, at most ``most`` (and never below 0)."""
    return most if deadline is None else max(0.0, min(most, deadline - time.monotonic()))


def expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


class ReleaseSource(Protocol):
    """What the release wait asks of a gate (``Gate`` and ``RemoteGate`` both are one)."""

    def updates_for_sha(self, sha: str, prompt_name: str | None = None, mode: str | None = None) -> list[Update]: ...

    def status(self, update_id: int, failures: int = ...) -> UpdateReport: ...


def wait_for_release(
    gate: ReleaseSource,
    sha: str,
    prompt: str | None,
    timeout: float | None,
    poll: float,
    mode: str | None,
    on_select: Callable[[str], object] | None,
    watch: Callable[[UpdateReport, float | None], object] | None = None,
) -> tuple[int, list[UpdateReport]]:
    """Wait for the updates submitted for commit ``sha`` that ``release_updates`` picks for
    ``mode``, the latest one per prompt, until each is terminal, and return (the exit code as
    `wait ID` gives it, combined by ``combine_exit_codes``; their reports). ``on_select`` is
    told, in a line, which updates. Until one appears, it is looked for every ``poll``
    seconds up to ``timeout``; with no timeout, or when none appears in time, NotFound.

    While one is open, ``watch(open_report, deadline)`` waits for it to change (the service's
    client: a long-poll); without one, the loop sleeps ``poll`` seconds and looks again."""
    sha = (sha or "").strip()
    if not SHA_RE.fullmatch(sha):
        raise UsageError(f"{sha!r} is not a commit SHA")
    announce = Announcer(sha, mode, on_select)
    deadline = deadline_after(timeout)
    while True:
        chosen, updates = release_updates(gate.updates_for_sha(sha, prompt, mode or DEFAULT_RELEASE_MODE), mode)
        out_of_time = expired(deadline)
        if updates:
            announce(chosen)
            reports = [gate.status(u.id) for u in updates]
            if out_of_time or all(r.terminal for r in reports):
                return combine_exit_codes(r.exit_code for r in reports), reports
            if watch is not None:
                watch(next(r for r in reports if not r.terminal), deadline)
                continue
        elif deadline is None or out_of_time:
            raise no_update(sha, prompt, mode)
        time.sleep(time_left(deadline, poll))
