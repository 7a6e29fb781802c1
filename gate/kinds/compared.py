"""A generative answer compared with live's by a judge (``decision: {type: judge, judge:
<name>, compare: live}``): the judge reads both answers, in both orders; a win is the
candidate's, a loss live's, and the run's wins and losses are its flips against live.

Its checks (``ComparedKind.checks``, the judged kind's): with no live version to compare
with, ``min_accuracy`` (the share not lost) and ``max_loss_rate`` are n/a; with one,
``max_loss_rate`` bars the share lost."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.records.metrics import JudgeFigures, PairwiseFigures, RunFigures
from gate.records.pinned import PinnedJudge
from gate.verdict.bar_checks import BarCheck
from gate.verdict.bars import Bars

from .base import EVERY_KIND_BARS, LIVE_BARS
from .judged import NO_LIVE, JudgedKind
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
    live = JUDGED_PAIRS  # the judge's wins and losses are the flips
    # wins and losses read as fixed and broken; no corrected pass rate (no error rates of a comparison)
    bars_computable = EVERY_KIND_BARS | LIVE_BARS | {"max_loss_rate", "sentinels"}

    def judge_calls(self, trials: int) -> int:
        return trials * 2  # both orders

    def judged_baseline(self, live: bool, bars: Bars) -> dict[str, Any]:
        """Live's answers, by the judge (none yet: said so)."""
        note = None if live else "no live version yet"
        return {"baseline": None, "baseline_note": note or "compared by the judge, in both orders"}

    def judged_figures(
        self, pinned: PinnedJudge, passed: int, scored: int, confidence: float, figures: RunFigures
    ) -> dict[str, Any]:
        return {"pairwise": PairwiseFigures.made(**pairwise_counts(figures.confusion or {}, bool(pinned.live)))}

    def accuracy_check(self, bars: Bars, judged: JudgeFigures, check: BarCheck) -> BarCheck:
        """n/a with no live version to compare with; else as a judged run's."""
        if judged.pairwise is not None and not judged.pairwise.live:
            return BarCheck(check.name, None, check.limit, None, "n/a", NO_LIVE)
        return super().accuracy_check(bars, judged, check)


COMPARED = ComparedKind()
