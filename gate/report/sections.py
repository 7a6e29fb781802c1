"""Which of the kinds' report sections (``gate.kinds.sections``: each kind names its own,
``DecisionKind.sections``) an update's report shows: a section is shown when one of its
runs has its figures. The comment (``gate.report.markdown``) and the status page
(``gate.service.views``) both ask here, and render each section shown under its title, so
the two show the same sections (tests/unit/test_report_sections.py).

Also the items a run lists once each: the broken ones, and the other failing ones (a broken
item is failing too: listed under broken only)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gate.kinds import kind_of
from gate.kinds.sections import Key, Section, ordered
from gate.records.metrics import RunFigures
from gate.records.pinned import Pinned

from .update import RunReport


def kind_sections(run: RunReport) -> tuple[Section, ...]:
    """The sections of the run's kind, in order (a run without a pinned decision: a label's)."""
    return kind_of(Pinned.of(run.pinned).decision).sections()


def other_failures(run: RunReport) -> list[Any]:
    """The run's failing samples that are not among its broken ones."""
    listed = {b.item_id for b in run.broken}
    return [f for f in run.failures if f.item_id not in listed]


def failing_total(run: RunReport) -> int:
    """The run's failing items: wrong answers and errors."""
    metrics = run.metrics or {}
    return (metrics.get("mismatches", run.scored - run.matches) or 0) + (run.errors or 0)


def other_failing_total(run: RunReport) -> int:
    """The failing items that are not broken (a broken item is a MISMATCH the comparison counts)."""
    broken = (run.comparison or {}).get("broken") or len(run.broken)
    return max(0, failing_total(run) - broken)


def _bars(run: RunReport) -> bool:
    return any(c["bar"] != "min_accuracy" for c in run.checks)


HAS: dict[Key, Callable[[RunReport], Any]] = {
    Key.PROTECTED: lambda r: r.protected and r.protected.get("broken"),
    Key.COMPARED: lambda r: r.comparison or (r.baseline_note and r.status == "DONE"),
    Key.CHECKS: _bars,
    Key.CHECK_RATES: lambda r: r.check_rates,
    Key.FIELDS: lambda r: r.fields and r.fields.get("fields"),
    Key.SLICES: lambda r: r.slices and r.slices.get("slices"),
    Key.ACCEPTED: lambda r: r.accepted_breaks,
    Key.SCHEMA: lambda r: r.schema,
    Key.JUDGE: lambda r: r.judge,
    Key.TOOL_CALLS: lambda r: r.tool_calls,
    Key.LABELS: lambda r: r.labels or RunFigures.of(r.metrics).confusion,
    Key.FIELD_CONFUSION: lambda r: r.fields and r.fields.get("confusion"),
    Key.UNSTABLE: lambda r: r.unstable,
    Key.BROKEN: lambda r: r.broken,
    Key.FAILING: lambda r: other_failures(r) or other_failing_total(r),
}


def run_shows(run: RunReport, section: Section) -> bool:
    return bool(HAS[section.key](run))


def run_sections(run: RunReport) -> tuple[Section, ...]:
    """The per-dataset sections the run shows (its kind's, with figures)."""
    return tuple(s for s in kind_sections(run) if s.scope == "run" and run_shows(run, s))


def update_sections(runs: Sequence[RunReport]) -> tuple[Section, ...]:
    """The update's sections shown: every section of a run's kind that one of its runs has
    figures for, in order (per-dataset ones too: the comment's details, the page's datasets)."""
    return ordered([s for r in runs for s in kind_sections(r) if run_shows(r, s)])


def keyed(sections: Sequence[Section]) -> dict[str, Section]:
    """The sections by key, for a template: ``sections.judge.title``."""
    return {s.key.value: s for s in sections}
