"""The outcome of one Action run: its ``status`` output, its exit code and its commit
status, from the updates' reports and the invalid files."""

from __future__ import annotations

from collections.abc import Sequence

from gate.api.release import combine_exit_codes
from gate.report.update import UpdateReport
from gate.states import EXIT_CODES, UpdateStatus

from .problems import Problem


def overall_status(reports: Sequence[UpdateReport], problems: Sequence[Problem]) -> str:
    """The `status` output: failed, cancelled, invalid, rejected, timeout, applied, passed or skipped."""
    statuses = {r.status for r in reports}
    if UpdateStatus.FAILED in statuses:
        return "failed"
    if UpdateStatus.CANCELLED in statuses:
        return "cancelled"
    if any(p.severity == "error" for p in problems):
        return "invalid"
    if UpdateStatus.REJECTED in statuses:
        return "rejected"
    if statuses & {UpdateStatus.PENDING, UpdateStatus.RUNNING}:
        return "timeout"
    if UpdateStatus.APPLIED in statuses:
        return "applied"
    if UpdateStatus.PASSED in statuses:
        return "passed"
    return "skipped"


def exit_code_for(reports: Sequence[UpdateReport], problems: Sequence[Problem], fail_on_reject: bool = True) -> int:
    codes = [EXIT_CODES[UpdateStatus(r.status)] for r in reports]
    if any(p.severity == "error" for p in problems):
        codes.append(2)
    if not fail_on_reject:
        codes = [0 if c == 1 else c for c in codes]
    return combine_exit_codes(codes)


def commit_state(reports: Sequence[UpdateReport], problems: Sequence[Problem], timeout: float) -> tuple[str, str]:
    """(state, description) of the prompt-gate commit status."""
    status = overall_status(reports, problems)
    n_err = sum(1 for p in problems if p.severity == "error")
    by = {}
    for r in reports:
        by.setdefault(r.status, []).append(r.update.prompt_name)
    if status == "skipped":
        return "success", "no gated prompt changed"
    if status == "failed":
        return "error", f"could not be scored: {', '.join(by[UpdateStatus.FAILED])}"
    if status == "cancelled":
        return "error", f"cancelled (superseded?): {', '.join(by[UpdateStatus.CANCELLED])}"
    if status == "invalid":
        return "failure", f"{n_err} invalid prompt file{'s' if n_err != 1 else ''}"
    if status == "rejected":
        return "failure", f"rejected: {', '.join(by[UpdateStatus.REJECTED])}"
    if status == "timeout":
        return "error", f"still running after {timeout:g}s; see `promptgate wait`"
    word = "applied" if status == "applied" else "passed"
    return "success", f"{len(reports)} prompt{'s' if len(reports) != 1 else ''} {word} every bar"
