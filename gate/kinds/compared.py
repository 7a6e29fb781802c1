"""A generative answer compared with live's by a judge (``decision: {type: judge, judge:
<name>, compare: live}``): the judge reads both answers, in both orders; a win is the
candidate's, a loss live's, and the run's wins and losses are its flips against live.

Its checks (``ComparedKind.checks``): with no live version to compare with (or no item
compared) nothing was judged: ``min_accuracy`` and ``max_loss_rate`` fail as not judged
(``UNJUDGED``: the update FAILED, never a pass). With one, ``min_accuracy`` bars the share
of the items compared consistently not lost (wins and ties on which both orders agree: a
position-inconsistent item never counts), ``max_loss_rate`` the share lost, and
``max_inconsistent`` the share position-inconsistent: above it the run is inconclusive (the
judge cannot order these answers)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

from gate.records.metrics import JudgeFigures, PairwiseFigures, RunFigures, RunMetrics
from gate.records.pinned import PinnedJudge
from gate.verdict.bar_checks import BarCheck
from gate.verdict.bars import Bars
from gate.verdict.scoring import format_bar, format_pct

from .base import EVERY_KIND_BARS, LIVE_BARS, Decision
from .judged import NO_LIVE, UNJUDGED, JudgedKind
from .live import JUDGED_PAIRS

OUTCOMES = ("win", "loss", "tie", "inconsistent")


def pairwise_counts(confusion: Mapping[str, Mapping[str, int]], live: bool) -> dict[str, Any]:
    """Wins, losses, ties and position-inconsistent items (counted as ties) of a comparison,
    from the run's answers (expected label × outcome)."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for row in confusion.values():
        for outcome, n in row.items():
            if outcome in counts:
                counts[outcome] += int(n)
    compared = sum(counts.values())
    return {
        "live": live,
        "wins": counts["win"],
        "losses": counts["loss"],
        "ties": counts["tie"] + counts["inconsistent"],
        "inconsistent": counts["inconsistent"],
        "compared": compared,
    }


class ComparedKind(JudgedKind):
    name = "compared"
    bar_scope = (
        "compared with live by a judge, decision compare: live"  # how a refused bar names the kind (gate.kinds.bar_fit)
    )
    live = JUDGED_PAIRS  # the judge's wins and losses are the flips
    grades_live = False  # the judge reads live's answer beside the candidate's, item by item
    first_unjudged = True  # no live version: nothing compared (an admin may accept it: gate.domain.unjudged)
    # wins and losses read as fixed and broken; no corrected pass rate (no error rates of a comparison)
    bars_computable = EVERY_KIND_BARS | LIVE_BARS | {"max_loss_rate", "max_inconsistent", "sentinels"}

    def judge_calls(self, trials: int) -> int:
        return trials * 2  # both orders

    def first_version(self, decision: Decision) -> Decision | None:
        """The graded rule its ``first:`` names, pinned as a first version's (``gate.kinds.first``)."""
        graded = decision.judge.graded_first() if decision.judge else None
        return Decision("judge", judge=graded) if graded else None

    def judged_baseline(self, live: bool, bars: Bars) -> dict[str, Any]:
        """Live's answers, by the judge (none yet: said so)."""
        note = None if live else "no live version yet"
        return {"baseline": None, "baseline_note": note or "compared by the judge, in both orders"}

    def judged_figures(
        self, pinned: PinnedJudge, passed: int, scored: int, confidence: float, figures: RunFigures
    ) -> dict[str, Any]:
        return {"pairwise": PairwiseFigures.made(**pairwise_counts(figures.confusion or {}, bool(pinned.live)))}

    def checks(self, bars: Bars, metrics: RunMetrics, base_checks: list[BarCheck]) -> list[BarCheck]:
        """The judged kind's checks, and ``max_inconsistent`` when items were compared."""
        out = super().checks(bars, metrics, base_checks)
        judged = RunFigures.of(metrics).judge
        pairwise = judged.pairwise if judged else None
        if pairwise is not None and pairwise.live and pairwise.compared:
            out.append(inconsistent_check(bars.judge.max_inconsistent, pairwise))
        return out

    def accuracy_check(self, bars: Bars, judged: JudgeFigures, check: BarCheck) -> BarCheck:
        """The share of the items compared consistently not lost; not judged (a fail,
        ``UNJUDGED``) with no live version to compare with or no item compared."""
        pairwise = judged.pairwise
        if pairwise is None:
            return super().accuracy_check(bars, judged, check)
        limit = format_bar(bars.min_accuracy)
        if not pairwise.live or not pairwise.compared:
            why = NO_LIVE if not pairwise.live else "no item was compared"
            return BarCheck("min_accuracy", None, limit, None, "fail", why, UNJUDGED)
        kept = pairwise.compared - pairwise.losses - pairwise.inconsistent
        note = (
            f"not lost on {kept} of {pairwise.compared} compared; "
            f"{pairwise.inconsistent} position-inconsistent never count"
            if pairwise.inconsistent
            else None
        )
        state = "pass" if Fraction(kept, pairwise.compared) >= Fraction(bars.min_accuracy) else "fail"
        return BarCheck(
            "min_accuracy", None, limit, format_pct(kept, pairwise.compared, bars.min_accuracy), state, note
        )


def inconsistent_check(limit: Decimal, pairwise: PairwiseFigures) -> BarCheck:
    """``max_inconsistent``: at most this share of the items compared position-inconsistent
    (the two orders disagree); above it the run is inconclusive: the judge cannot order
    these answers."""
    n, compared = pairwise.inconsistent, pairwise.compared
    shown = format_pct(n, compared, limit)
    if Fraction(n, compared) <= Fraction(limit):
        return BarCheck("max_inconsistent", None, format_bar(limit), shown, "pass", f"{n} position-inconsistent")
    why = (
        f"inconclusive: {n} of {compared} compared items position-inconsistent ({shown}) > max_inconsistent "
        f"{format_bar(limit)}: the judge cannot order these answers"
    )
    return BarCheck("max_inconsistent", None, format_bar(limit), shown, "fail", why, "inconclusive")


COMPARED = ComparedKind()
