"""The outcome of one Action run: its ``status`` output, its exit code and its commit
status, from the updates' reports and the invalid files."""

from __future__ import annotations

from collections.abc import Sequence

from gate.contract.release import combine_exit_codes
from gate.report import unjudged
from gate.report.canary import ENDED_BADLY
from gate.report.update import UpdateReport
from gate.states import UpdateStatus

from .problems import Problem


def overall_status(reports: Sequence[UpdateReport], problems: Sequence[Problem], blocked: str | None = None) -> str:
    """The `status` output: failed, cancelled, invalid, rejected, rolled-back (applied, then
    its canary rolled back or undecided: gate.report.canary), timeout, not-judged (applied
    without a judge, an admin's acceptance: gate.report.unjudged), applied, passed or
    skipped (``blocked``: the run could not gate at all, e.g. the token's scope: failed)."""
    statuses = {r.status for r in reports}
    if blocked or UpdateStatus.FAILED in statuses:
        return "failed"
    if UpdateStatus.CANCELLED in statuses:
        return "cancelled"
    if any(p.severity == "error" for p in problems):
        return "invalid"
    if UpdateStatus.REJECTED in statuses:
        return "rejected"
    if any(r.outcome in ENDED_BADLY for r in reports):
        return "rolled-back"
    if statuses & {UpdateStatus.PENDING, UpdateStatus.RUNNING}:
        return "timeout"
    if any(r.outcome == unjudged.OUTCOME for r in reports):  # live, but nothing judged it: no success
        return "not-judged"
    if UpdateStatus.APPLIED in statuses:
        return "applied"
    if UpdateStatus.PASSED in statuses:
        return "passed"
    return "skipped"


def exit_code_for(
    reports: Sequence[UpdateReport],
    problems: Sequence[Problem],
    fail_on_reject: bool = True,
    blocked: str | None = None,
) -> int:
    """0 every changed prompt cleared its bars (or none changed), 1 a rejection (with
    fail-on-reject), 2 an invalid or ungated file, a failure, or a run that could not gate
    (``blocked``), 3 still open at the timeout."""
    codes = [r.exit_code for r in reports]  # 1 for an update whose canary was rolled back
    if blocked or any(p.severity == "error" for p in problems):
        codes.append(2)
    if not fail_on_reject:
        codes = [0 if c == 1 else c for c in codes]
    return combine_exit_codes(codes)


def commit_state(
    reports: Sequence[UpdateReport], problems: Sequence[Problem], timeout: float, blocked: str | None = None
) -> tuple[str, str]:
    """(state, description) of the prompt-gate commit status. Success only for what was
    judged: a changed prompt the gate has no bars for is a problem (failure, its one line);
    a prompt judged on the bars its pull request proposes says so."""
    status = overall_status(reports, problems, blocked)
    errors = [p for p in problems if p.severity == "error"]
    by: dict[str, list[str]] = {}
    for r in reports:
        by.setdefault(r.status, []).append(r.update.prompt_name)
    if blocked:
        return "error", blocked
    if status == "skipped":
        return "success", "no prompt changed"
    if status == "failed":
        return "error", f"could not be scored: {', '.join(by[UpdateStatus.FAILED])}"
    if status == "cancelled":
        return "error", f"cancelled (superseded?): {', '.join(by[UpdateStatus.CANCELLED])}"
    if status == "invalid":
        first = f"{errors[0].file}: {errors[0].reason}"
        return "failure", first if len(errors) == 1 else f"{len(errors)} invalid files; first: {first}"
    if status == "rejected":
        return "failure", f"rejected: {', '.join(by[UpdateStatus.REJECTED])}"
    if status == "rolled-back":
        back = [r for r in reports if r.outcome in ENDED_BADLY]
        said = f"{back[0].update.prompt_name} {back[0].outcome_sentence}"
        return "failure", said if len(back) == 1 else f"{len(back)} rolled back in production; first: {said}"
    if status == "timeout":
        return "error", f"still running after {timeout:g}s; see `promptgate wait`"
    if status == "not-judged":  # never a success about what no bar judged
        names = [r.update.prompt_name for r in reports if r.outcome == unjudged.OUTCOME]
        return "failure", f"applied, not judged (accepted by an admin without a judge): {', '.join(names)}"
    word = "applied" if status == "applied" else "passed"
    proposed = [r.update.prompt_name for r in reports if (r.update.source or {}).get("proposed_bars")]
    on_proposed = f"; {', '.join(proposed)} on the bars this PR proposes (judged again after merge)" if proposed else ""
    canaries = [r.update.prompt_name for r in reports if r.outcome == "CANARY"]
    in_canary = f"; {', '.join(canaries)} canary in progress, not yet judged by production" if canaries else ""
    plural = "s" if len(reports) != 1 else ""
    return "success", f"{len(reports)} prompt{plural} {word} every bar{on_proposed}{in_canary}"
