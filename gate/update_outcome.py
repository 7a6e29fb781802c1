"""How an update whose runs are all terminal ends (``update_end``; an item's verdict is
``states.Verdict``): FAILED when a run could not be scored (or the live version's answers
a max_broken bar needs could not be had), REJECTED when any bar of any run fails
(gate.bars: a bar n/a does not block), else PASSED (check) or APPLIED (apply). A baseline
run that failed otherwise only shows in the report."""

from __future__ import annotations

from typing import Sequence

from .bars import BarCheck, check, pinned_bars
from .states import Mode, RunStatus, UpdateStatus


def run_checks(run) -> list[BarCheck]:
    """A finished run against the bars pinned with it."""
    return check(pinned_bars(run.pinned, run.min_accuracy), run.metrics or {})


def update_end(mode: str, runs: Sequence) -> tuple[UpdateStatus, str]:
    """``runs`` have .status, .dataset_name, .metrics, .min_accuracy, .pinned and .reason."""
    if not runs:
        return UpdateStatus.FAILED, "no runs"
    broken = [r for r in runs if r.status != RunStatus.DONE]
    if broken:
        why = "; ".join(f"{r.dataset_name}: {r.reason or r.status}" for r in broken)
        return UpdateStatus.FAILED, f"could not be scored: {why}"
    unanswered = [r for r in runs if (r.metrics or {}).get("baseline_error") and _needs_live(r)]
    if unanswered:
        why = "; ".join(f"{r.dataset_name}: {r.metrics['baseline_error']} ({_needs_live(r)} needs it)"
                        for r in unanswered)
        return UpdateStatus.FAILED, f"could not be scored: {why}"
    checks = [(r, run_checks(r)) for r in runs]
    # a bar still pending (not compared yet) never passes: reconcile compares first, so
    # this only guards against a verdict taken too early
    # a protected item that broke is named first (sorted is stable: the rest keep their order)
    missed = [text for _, text in sorted(((c.name != "protected", _missed(r.dataset_name, c)) for r, cs in checks
                                          for c in cs if c.state in ("fail", "pending")), key=lambda m: m[0])]
    if missed:
        return UpdateStatus.REJECTED, "missed: " + "; ".join(missed)
    cleared = "; ".join(f"{r.dataset_name} {c.value} ≥ {c.limit}" for r, cs in checks for c in cs
                        if c.name == "min_accuracy")
    skipped = sorted({c.title for _, cs in checks for c in cs if c.state == "n/a"})
    tail = f"; not applied: {', '.join(skipped)}" if skipped else ""
    return (UpdateStatus.APPLIED if mode == Mode.APPLY else UpdateStatus.PASSED), f"every bar cleared ({cleared}){tail}"


def _needs_live(run) -> str | None:
    """Which bar of the run needs the live version's answers: max_broken, or the
    protection of its protected items."""
    if pinned_bars(run.pinned, run.min_accuracy).max_broken is not None:
        return "max_broken"
    return "protection" if ((run.metrics or {}).get("protected") or {}).get("items") else None


def _missed(dataset: str, c: BarCheck) -> str:
    if c.value is None:          # a bar that applies and could not be computed
        return f"{dataset} {c.title}: {c.note}"
    if c.name == "protected":
        return f"{dataset}: {c.value} protected item{'s' if c.value != '1' else ''} broke ({(c.note or '').removeprefix('broken: ')})"
    if c.name == "min_accuracy":
        return f"{dataset} {c.value} < bar {c.limit}"
    relation = ">" if c.name.startswith("max_") else "<"
    return f"{dataset} {c.title} {c.value} {relation} bar {c.limit}"
