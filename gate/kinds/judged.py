"""A generative answer graded by a judge (``decision: {type: judge, judge: <name>, pass:
[...]}``, ``gate.prompt.judge``): the answer is its text; the judge's label decides, a pass
when it is one of ``pass``. The candidate is called once per item (the judge's trials are
``judge_trials``); its labels are the judge's, so the run shows none of its own.

Compared with live as the label kinds are (``grades_live``): live's answers on the same
items, graded by the same judge version (a baseline run, ``gate.domain.judging.
judged_baseline``), paired with the candidate's item by item: fixed, broken, McNemar, the
paired interval, and so ``max_broken`` and ``max_drop``. With no live version they are n/a
(nothing to compare with), never a pass.

Its checks (``JudgedKind.checks``): ``min_accuracy`` bars the pass rate corrected for the
judge's error rates when the mapping says so (``judge_corrected: true``; a corrected rate
that cannot be had fails the bar), and ``max_loss_rate`` fails: the run is not a comparison."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from typing import Any, cast

from gate.errors import SpecError
from gate.prompt.checks import parse_checks
from gate.prompt.judge import bounded_answer, parse_judge_rule
from gate.prompt.tool_decision import ToolCall
from gate.prompt.tools import Tool
from gate.records.metrics import JudgeFigures, RunFigures, RunMetrics
from gate.records.pinned import PinnedJudge
from gate.verdict.bar_checks import BarCheck
from gate.verdict.bars import Bars
from gate.verdict.judge_stats import corrected, uncorrectable
from gate.verdict.scoring import format_bar, format_pct
from gate.verdict.update_outcome import UNJUDGED

from . import sections as sec
from .base import (
    EVERY_KIND_BARS,
    LIVE_BARS,
    Decision,
    DecisionKind,
    FigureSource,
    Reading,
    SpecView,
    StoredDecision,
)
from .checks import check_figures, check_rate_checks, stored_checks

NOT_COMPARED = "no live version yet: nothing to compare with (not judged)"
NO_LIVE = (
    "no live version to compare with: the first version of a compared prompt cannot be judged by comparison; "
    "name a judge for it (decision first: {judge: NAME, pass: [...]}), or have an admin accept it "
    "not judged (submit --accept-unjudged)"
)


class JudgedKind(DecisionKind):
    name = "judged"
    bar_scope = "graded by a judge, decision pass:"  # how a refused bar names the kind (gate.kinds.bar_fit)
    judge_may_decide = False
    one_call_per_item = True
    # graded: live's answers graded by the same judge are paired with the candidate's (max_broken,
    # max_drop); no labels of its own, no comparison by the judge (max_loss_rate, max_inconsistent)
    bars_computable = EVERY_KIND_BARS | LIVE_BARS | {"judge_corrected", "sentinels", "min_check_rate"}
    grades_live = True  # compared with live's answers graded by the same judge (a baseline run)
    needs_row_labels = False  # a judge reads the answers: the rows need no label (issue 50.6)
    report_sections = frozenset({"judge"})

    def parse(
        self, value: Mapping[str, Any], kind: str, file: str | None, has_labels: bool, tools: tuple[Tool, ...]
    ) -> Decision:
        if has_labels:
            raise SpecError(
                file, "labels", "a judged prompt's answer is text: the judge's labels decide (decision.pass)"
            )
        if "checks" not in value:
            return Decision("judge", judge=parse_judge_rule(value, file))
        rule = parse_judge_rule({k: v for k, v in value.items() if k != "checks"}, file)
        if rule.compare is not None:
            raise SpecError(
                file, "decision.checks", "checks go before a grading judge (pass:), not a comparison (compare: live)"
            )
        return Decision("judge", judge=rule, checks=parse_checks(value["checks"], file))

    def figures(self, source: FigureSource, run_id: int, stored: StoredDecision) -> dict[str, Any]:
        """With checks before the judge: per check, the items that passed it."""
        rule = stored_checks(stored)
        return {} if rule is None else {"checks": check_figures(source, run_id, rule)}

    def own_sections(self) -> tuple[sec.Section, ...]:
        return (sec.JUDGE, sec.CHECK_RATES)  # per check: shown when checks go before the judge

    def keeps_labels(self, decision: Decision) -> bool:
        return False

    def keyed_rule(self, pinned_rule: dict[str, Any]) -> dict[str, Any]:
        # a judged prompt's answer is its text whoever judges it: a new judge reuses the answers
        return {"type": "judge"}

    def read(self, spec: SpecView, text: str, calls: tuple[ToolCall, ...], too_many: bool) -> Reading:
        return Reading(bounded_answer(text), True, calls)  # a generative answer: its text, as a judge will read it

    def judge_reads(self, decision: str | None, raw: str | None) -> str | None:
        return decision  # the answer's decision is its text, bounded as a judge reads it

    def maps_row_labels(self, stored: StoredDecision) -> bool:
        return False  # a judge reads the answers: the rows need no label of their own

    def judge_calls(self, trials: int) -> int:
        """The judge's calls on one item (sentinels come on top)."""
        return trials

    def judged_baseline(self, live: bool, bars: Bars) -> dict[str, Any]:
        """Graded with no live version: nothing to compare with, said so (max_broken and
        max_drop n/a). With one, live's graded answers are staged by ``gate.domain.judging``."""
        return {"baseline": None, "baseline_note": NOT_COMPARED}

    def judged_figures(
        self, pinned: PinnedJudge, passed: int, scored: int, confidence: float, figures: RunFigures
    ) -> dict[str, Any]:
        """finalize: the judge's figures of the kind: the pass rate corrected for the judge's
        error rates (``gate.verdict.judge_stats``), when it has them."""
        if not pinned.error_rates:
            return {}
        rates = cast("tuple[int, int, int, int]", tuple(pinned.error_rates))
        return {
            "corrected": corrected(passed, scored, rates, confidence),
            "uncorrected": uncorrectable(passed, scored, rates, confidence),
        }

    def checks(self, bars: Bars, metrics: RunMetrics, base_checks: list[BarCheck]) -> list[BarCheck]:
        """``min_accuracy`` as the kind holds it (``accuracy_check``), and ``max_loss_rate``
        (``loss_check``); a run without the judge's figures keeps its checks."""
        judged = RunFigures.of(metrics).judge
        base_checks = [with_checks_note(c, metrics) for c in base_checks] + check_rate_checks(bars, metrics)
        if not judged:
            return base_checks
        out = [self.accuracy_check(bars, judged, c) if c.name == "min_accuracy" else c for c in base_checks]
        if bars.judge.max_loss_rate is not None:
            out.append(loss_check(bars.judge.max_loss_rate, judged))
        return out

    def accuracy_check(self, bars: Bars, judged: JudgeFigures, check: BarCheck) -> BarCheck:
        """``min_accuracy`` on the corrected rate when the mapping says so."""
        return corrected_check(bars.min_accuracy, judged) if bars.judge.corrected else check


def with_checks_note(check: BarCheck, metrics: RunMetrics) -> BarCheck:
    """``min_accuracy`` of a judged prompt with checks says what it compares: the share of
    items that passed every check and then the judge (an item failing a check is a
    MISMATCH, never sent to the judge)."""
    figures = metrics.get("checks")
    if check.name != "min_accuracy" or not figures:
        return check
    failed = max((c["failed"] for c in figures.get("checks") or ()), default=0)
    note = "the share of items passing every check, then the judge (an item failing a check is not judged" + (
        f"; at least {failed} did)" if failed else ")"
    )
    return replace(check, note=f"{check.note}; {note}" if check.note else note)


def corrected_check(bar: Decimal, judged: JudgeFigures) -> BarCheck:
    """``min_accuracy`` on the pass rate corrected for the judge's error rates; failed when
    the judge's pinned figures give none."""
    found = judged.corrected
    if not found:
        why = "no corrected rate: " + (
            judged.uncorrected or "the judge's pinned figures give no sensitivity or specificity"
        )
        return BarCheck("min_accuracy", None, format_bar(bar), None, "fail", why)
    exact = Fraction(*found["exact"])
    shown = format_pct(exact.numerator, exact.denominator, bar)
    note = f"corrected for the judge's error rates; as judged {format_pct(judged.passed, judged.scored, bar)}"
    return BarCheck("min_accuracy", None, format_bar(bar), shown, "pass" if exact >= Fraction(bar) else "fail", note)


def loss_check(limit: Decimal, judged: JudgeFigures) -> BarCheck:
    """``max_loss_rate``: at most this share of the items compared lost to live; failed on a
    run that is not a comparison, and, as not judged (``UNJUDGED``), with no live version or
    no item compared."""
    pairwise = judged.pairwise
    if pairwise is None:
        return BarCheck(
            "max_loss_rate", None, format_bar(limit), None, "fail", "the run is not a comparison (compare: live)"
        )
    if not pairwise.live or not pairwise.compared:
        why = NO_LIVE if not pairwise.live else "no item was compared"
        return BarCheck("max_loss_rate", None, format_bar(limit), None, "fail", why, UNJUDGED)
    losses, compared = pairwise.losses, pairwise.compared
    state = "pass" if Fraction(losses, compared) <= Fraction(limit) else "fail"
    return BarCheck(
        "max_loss_rate", None, format_bar(limit), format_pct(losses, compared, limit), state, f"{losses} lost"
    )


JUDGED = JudgedKind()
