"""A generative answer decided by named deterministic checks (``decision: {type: checks,
checks: {NAME: {OP: ARG}}}``, ``gate.prompt.checks``): the answer is its text; the item is a
MATCH when every check passes on it and the item's columns. No judge, no labels: the item's
expected decision is not read.

Its figures: per check, the items scored that passed it (``checks``: counted in the database
from the items' masks of failed checks, as a fields decision's per-field figures are); its
bars: ``min_check_rate: {NAME: fraction}`` per check (``check_rate_checks``, also held by a
judged prompt with checks before its judge). Compared with live as the label kinds are:
the item verdicts paired with live's answers on the same items (fixed, broken)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from typing import Any, cast

from gate.errors import SpecError
from gate.prompt.checks import ChecksRule, parse_checks
from gate.prompt.judge import bounded_answer
from gate.prompt.tool_decision import ToolCall
from gate.prompt.tools import Tool
from gate.records.metrics import RunMetrics
from gate.states import Verdict
from gate.verdict.bar_checks import BarCheck
from gate.verdict.bars import Bars
from gate.verdict.scoring import format_bar, format_pct, metrics_from_breakdown

from . import sections as sec
from .base import EVERY_KIND_BARS, LIVE_BARS, Decision, DecisionKind, FigureSource, Reading, SpecView, StoredDecision

CHECKS_KEYS = ("type", "checks")


def stored_checks(stored: StoredDecision) -> ChecksRule | None:
    """The checks of a stored decision (a config's, a run's pin); None: none (or unreadable)."""
    raw = (stored or {}).get("checks")
    if raw is None:
        return None
    try:
        return parse_checks(raw, None)
    except SpecError:
        return None


def check_figures(source: FigureSource, run_id: int, rule: ChecksRule) -> dict[str, Any]:
    """Per check, in name order: the items scored and how many passed it."""
    counts = source.check_counts(run_id, len(rule.checks))
    scored = counts["scored"]
    return {
        "items": scored,
        "checks": [
            {"check": name, "passed": scored - failed, "failed": failed}
            for name, failed in zip(rule.names, counts["wrong"])
        ],
    }


def check_rate_checks(bars: Bars, metrics: RunMetrics) -> list[BarCheck]:
    """``min_check_rate`` per check: the share of the items scored that passed it. A check
    the candidate does not have fails (a pull request must not drop a check to drop its bar)."""
    figures = metrics.get("checks") or {}
    out = []
    for name, bar in sorted(bars.min_check_rate.items()):
        found = next((c for c in figures.get("checks") or () if c["check"] == name), None)
        if found is None:
            why = f"the candidate has no check {name!r}" if figures else "the candidate's decision has no checks"
            out.append(BarCheck("min_check_rate", name, format_bar(bar), None, "fail", why))
            continue
        out.append(rate_check(name, bar, found["passed"], figures["items"]))
    return out


def rate_check(name: str, bar: Decimal, passed: int, items: int) -> BarCheck:
    if items == 0:
        return BarCheck("min_check_rate", name, format_bar(bar), None, "n/a", "no item was scored")
    state = "pass" if Fraction(passed, items) >= Fraction(bar) else "fail"
    note = f"{items - passed} of {items} items failed it" if passed < items else None
    return BarCheck("min_check_rate", name, format_bar(bar), format_pct(passed, items, bar), state, note)


class ChecksKind(DecisionKind):
    name = "checks"
    bar_scope = "decided by checks"  # how a refused bar names the kind (gate.kinds.bar_fit)
    judge_may_decide = False
    bars_computable = EVERY_KIND_BARS | LIVE_BARS | {"min_check_rate"}
    report_sections = frozenset({"checks"})
    needs_row_labels = False  # its checks read the answer and the item's columns, not a label

    def parse(
        self, value: Mapping[str, Any], kind: str, file: str | None, has_labels: bool, tools: tuple[Tool, ...]
    ) -> Decision:
        extra = [k for k in value if k not in CHECKS_KEYS]
        if extra:
            raise SpecError(file, f"decision.{str(extra[0])[:80]}", "unknown field; a checks decision has checks")
        if has_labels:
            raise SpecError(file, "labels", "a checks decision's answer is text: its checks decide, not labels")
        if "checks" not in value:
            raise SpecError(file, "decision.checks", "a checks decision names its checks: {NAME: {OP: ARG}}")
        return Decision("checks", checks=parse_checks(value["checks"], file))

    def check_spec(self, decision: Decision, trials: int, prompt_kind: str, file: str | None) -> None:
        if trials != 1:
            raise SpecError(file, "trials", "a checks decision reads one answer per item: trials must be 1")
        super().check_spec(decision, trials, prompt_kind, file)

    def keeps_labels(self, decision: Decision) -> bool:
        return False

    def pins_labels(self, decision: Decision) -> bool:
        return False

    def keyed_rule(self, pinned_rule: dict[str, Any]) -> dict[str, Any]:
        return {"type": "checks"}  # the answer is its text whatever checks it: new checks reuse it

    def read(self, spec: SpecView, text: str, calls: tuple[ToolCall, ...], too_many: bool) -> Reading:
        return Reading(bounded_answer(text), True, calls)

    def score(self, decision: Decision | None, actual: str, expected: str) -> dict[str, Any]:
        return self.score_item(decision, actual, expected, None)

    def score_item(
        self, decision: Decision | None, actual: str, expected: str, item: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        rule = decision.checks if decision is not None else None
        if rule is None:
            return super().score(decision, actual, expected)
        mask = rule.failed(actual, item)
        out = {"verdict": Verdict.MISMATCH if mask else Verdict.MATCH, "fields_wrong": mask, "fields_missing": 0}
        return {**out, "judge": {"checks_failed": rule.failed_names(mask)}} if mask else out

    def maps_row_labels(self, stored: StoredDecision) -> bool:
        return False

    def own_sections(self) -> tuple[sec.Section, ...]:
        return (sec.CHECK_RATES,)  # no labels: its checks' pass rates instead

    def counts_by_label(self, stored: StoredDecision) -> bool:
        return False

    def check_labels(self, decision: Decision, labels: tuple[str, ...]) -> list[tuple[tuple[str, ...], str]]:
        return []

    def counts(self, source: FigureSource, run_id: int, stored: StoredDecision) -> dict[str, Any]:
        rows = cast("Sequence[tuple[str, str, str | None, int]]", source.fields_breakdown(run_id))  # no expected label
        return metrics_from_breakdown(rows, confusion_matrix=False)

    def figures(self, source: FigureSource, run_id: int, stored: StoredDecision) -> dict[str, Any]:
        rule = stored_checks(stored)
        return {} if rule is None else {"checks": check_figures(source, run_id, rule)}

    def checks(self, bars: Bars, metrics: RunMetrics, base_checks: list[BarCheck]) -> list[BarCheck]:
        """``min_accuracy`` says what it compares (items passing every check), then a bar per check."""
        said = [
            replace(c, note=c.note or "the share of items passing every check") if c.name == "min_accuracy" else c
            for c in base_checks
        ]
        return said + check_rate_checks(bars, metrics)


CHECKS = ChecksKind()
