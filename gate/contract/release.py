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
token's check for the commit (its SHA and content the caller's choice) would answer.

A commit that changed no prompt has no update at all: the Action's push job records, per
commit, what it did (``CommitRecord``: submitted, nothing to gate, or not gated and why), so
``apply`` and ``auto`` answer for every commit the Action saw: its apply-mode updates when it
has any, else that record (nothing to gate: ``EXIT_NOTHING_TO_GATE``; not gated: 2). Until
one of them appears the wait waits (no timeout: for as long as it takes); a timeout that
passes first is ``WaitTimedOut`` (exit 3)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from gate.errors import UsageError, WaitTimedOut
from gate.states import Mode

if TYPE_CHECKING:
    from gate.records import CommitRecord, Update
    from gate.report.update import UpdateReport

RELEASE_MODES = ("auto", "apply", "check")
DEFAULT_RELEASE_MODE = "apply"
SHA_RE = re.compile(r"[0-9a-fA-F]{7,64}")  # what `wait --sha` accepts as a commit
SHA_POLL = 0.5  # seconds between two look-ups of a commit's updates before any appears
EXIT_NOTHING_TO_GATE = 4  # `wait --sha`: the push job recorded that the commit needed no gating


def combine_exit_codes(codes: Iterable[int]) -> int:
    """Several updates' exit codes as one: 2 (failed, cancelled, invalid) before 1
    (rejected) before 3 (still open) before 5 (applied, not judged) before 0."""
    codes = set(codes)
    for code in (2, 1, 3, 5):
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


def no_update(sha: str, prompt: str | None, mode: str | None) -> WaitTimedOut:
    """The one line when the timeout passed before the commit had an update the wait may
    answer for (or, apply and auto, the push job's record)."""
    what = f" for prompt {prompt}" if prompt else ""
    mode = check_release_mode(mode)
    kind = "" if mode == "auto" else f"{mode}-mode "
    record = "" if mode == Mode.CHECK else " and the Action's push job recorded nothing for it"
    hint = "; `--mode check` answers for its checks" if mode == Mode.APPLY else ""
    return WaitTimedOut(
        f"no {kind}update was submitted for commit {sha}{what}{record} (wait needs the full SHA the "
        f"Action or `promptgate submit --sha` used{hint})"
    )


def record_line(record: CommitRecord) -> str:
    """What the push job's record of a commit says, in one line."""
    who = f" (recorded by {record.recorded_by})" if record.recorded_by else ""
    if record.outcome == "nothing":
        return f"commit {record.sha[:12]}: nothing to gate: the Action's push job found no prompt change{who}"
    if record.outcome == "not-gated":
        return f"commit {record.sha[:12]}: not gated: {record.detail or 'see the push job'}{who}"
    ids = ", ".join(map(str, record.update_ids))
    return f"commit {record.sha[:12]}: the Action's push job submitted update(s) {ids}"


def record_answer(record: CommitRecord | None, prompt: str | None = None) -> int | None:
    """The exit code a record gives: 4 nothing to gate (for any one prompt too: none
    changed), 2 not gated; None: no answer (no record, or its updates answer)."""
    if record is None:
        return None
    if record.outcome == "nothing":
        return EXIT_NOTHING_TO_GATE
    if record.outcome == "not-gated":
        return 2
    return None  # submitted: its updates answer (they are listed under the commit)


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

    def commit_record(self, sha: str) -> CommitRecord | None: ...


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
    told, in a line, which updates, or what the push job recorded. Until an update or a
    record answers, the commit is looked up every ``poll`` seconds, without a timeout for as
    long as it takes; when ``timeout`` passes first, ``WaitTimedOut`` (exit 3).

    While one is open, ``watch(open_report, deadline)`` waits for it to change (the service's
    client: a long-poll); without one, the loop sleeps ``poll`` seconds and looks again."""
    sha = (sha or "").strip()
    if not SHA_RE.fullmatch(sha):
        raise UsageError(f"{sha!r} is not a commit SHA")
    announce = Announcer(sha, mode, on_select)
    said: set[str] = set()
    deadline = deadline_after(timeout)
    while True:
        # The record first: the push job records a commit after submitting its applies, so
        # updates read after a record of "submitted" include the ones it names (read the
        # other way round, both could land between the reads: no update, "submitted", and
        # the wait said nothing to gate of a commit whose apply was never judged).
        record = None if check_release_mode(mode) == Mode.CHECK else gate.commit_record(sha)
        chosen, updates = release_updates(gate.updates_for_sha(sha, prompt, mode or DEFAULT_RELEASE_MODE), mode)
        out_of_time = expired(deadline)
        recorded = _recorded(record, bool(updates), on_select, said)
        if recorded is not None and not updates:
            return recorded, []
        if updates:
            announce(chosen)
            reports = [gate.status(u.id) for u in updates]
            if out_of_time or all(r.terminal for r in reports):
                return combine_exit_codes([*(r.exit_code for r in reports), *([recorded] if recorded else [])]), reports
            if watch is not None:
                watch(next(r for r in reports if not r.terminal), deadline)
                continue
        elif out_of_time:
            raise no_update(sha, prompt, mode)
        time.sleep(time_left(deadline, poll))


def _recorded(record: CommitRecord | None, has_updates: bool, say, said: set[str]) -> int | None:
    """The exit code the push job's ``record`` (read before the updates; None in check mode)
    adds to the wait: nothing to gate when the commit has no apply-mode update, not gated
    whatever it has; None: none. Said once, through ``say``."""
    code = record_answer(record)
    if record is not None and record.outcome == "submitted" and not has_updates:
        code = EXIT_NOTHING_TO_GATE  # (--prompt) that prompt did not change in the commit
    if code is None or (code == EXIT_NOTHING_TO_GATE and has_updates):
        return None
    assert record is not None  # record_answer answers None for no record
    if say is not None and record.outcome not in said:
        said.add(record.outcome)
        say(record_line(record))
    return code
