"""The bars and settings of a mapping that only a judged run reads (gate/prompt/judge.py),
parsed from untrusted config and pinned with the run like every bar:

* ``judge_corrected: true``: ``min_accuracy`` bars the pass rate corrected for the judge's
  own error rates (Rogan–Gladen, ``gate.verdict.judge_stats``) instead of the pass rate as
  judged. A corrected rate that cannot be had (the judge's pinned figures lack a passing
  or a failing human label, or its sensitivity + specificity ≤ 1) fails the bar.
* ``max_loss_rate``: a comparison against live (``compare: live``): at most this share of
  items lost (both orders agree the live answer is better).
* ``sentinels``: how many of the judge's human-labelled items are mixed into the run's
  judging calls (default 20, at most 200; 0: none).

A comparison's items are MATCH unless lost, so ``min_accuracy`` bars the share not lost,
and its ``max_drop`` and ``max_broken`` read the wins and losses as the comparison with
live reads fixed and broken items. With no live version to compare with they are n/a, and
the report says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from gate.errors import UsageError
from gate.records.metrics import JudgeFigures, RunFigures

from .scoring import format_bar, format_pct, parse_bar

KEYS = ("judge_corrected", "max_loss_rate", "sentinels")
DEFAULT_SENTINELS = 20
MAX_SENTINELS = 200
NO_LIVE = "no live version to compare with: the comparison's bars are not applied"


@dataclass(frozen=True)
class JudgeBars:
    corrected: bool = False
    max_loss_rate: Decimal | None = None
    sentinels: int = DEFAULT_SENTINELS

    @classmethod
    def parse(cls, extra: Mapping[str, Any]) -> JudgeBars:
        corrected = extra.get("judge_corrected")
        corrected = False if corrected is None else corrected
        if not isinstance(corrected, bool):
            raise UsageError(f"judge_corrected {corrected!r} is not true or false")
        loss = extra.get("max_loss_rate")
        sentinels = extra.get("sentinels")
        sentinels = DEFAULT_SENTINELS if sentinels is None else sentinels
        if isinstance(sentinels, bool) or not isinstance(sentinels, int) or not 0 <= sentinels <= MAX_SENTINELS:
            raise UsageError(f"sentinels {sentinels!r} is out of range: a whole number from 0 to {MAX_SENTINELS}")
        return cls(corrected, None if loss is None else parse_bar(loss, "max_loss_rate"), sentinels)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"judge_corrected": True} if self.corrected else {}
        if self.max_loss_rate is not None:
            out["max_loss_rate"] = f"{self.max_loss_rate:f}"
        if self.sentinels != DEFAULT_SENTINELS:
            out["sentinels"] = self.sentinels
        return out

    def describe(self) -> list[str]:
        out = ["bars the judge-corrected pass rate"] if self.corrected else []
        if self.max_loss_rate is not None:
            out.append(f"losses vs live ≤ {format_bar(self.max_loss_rate)}")
        if self.sentinels != DEFAULT_SENTINELS:
            out.append(f"{self.sentinels} sentinels")
        return out


def judged_checks(bars, metrics: Mapping[str, Any], checks: list, BarCheck) -> list:  # noqa: N803
    """A judged run's checks (``BarCheck``: gate.verdict.bar_checks', which calls this):
    ``min_accuracy`` on the corrected rate when the mapping says so, on a comparison with
    no live version n/a; ``max_loss_rate``. Runs not judged keep their checks."""
    judged = RunFigures.of(metrics).judge
    if not judged:
        return checks
    out = []
    for c in checks:
        if c.name == "min_accuracy" and judged.pairwise is not None and not judged.pairwise.live:
            c = BarCheck(c.name, None, c.limit, None, "n/a", NO_LIVE)
        elif c.name == "min_accuracy" and bars.judge.corrected:
            c = _corrected_check(bars.min_accuracy, judged, BarCheck)
        out.append(c)
    if bars.judge.max_loss_rate is not None:
        out.append(_loss_check(bars.judge.max_loss_rate, judged, BarCheck))
    return out


def _corrected_check(bar: Decimal, judged: JudgeFigures, make) -> Any:
    found = judged.corrected
    if not found:
        why = "the judge's pinned figures give no corrected rate (no sensitivity or specificity, or Se + Sp ≤ 1)"
        return make("min_accuracy", None, format_bar(bar), None, "fail", why)
    exact = Fraction(*found["exact"])
    shown = format_pct(exact.numerator, exact.denominator, bar)
    note = f"corrected for the judge's error rates; as judged {format_pct(judged.passed, judged.scored, bar)}"
    return make("min_accuracy", None, format_bar(bar), shown, "pass" if exact >= Fraction(bar) else "fail", note)


def _loss_check(limit: Decimal, judged: JudgeFigures, make) -> Any:
    pairwise = judged.pairwise
    if pairwise is None:
        return make(
            "max_loss_rate", None, format_bar(limit), None, "fail", "the run is not a comparison (compare: live)"
        )
    if not pairwise.live:
        return make("max_loss_rate", None, format_bar(limit), None, "n/a", NO_LIVE)
    losses, compared = pairwise.losses, pairwise.compared
    if not compared:
        return make("max_loss_rate", None, format_bar(limit), None, "n/a", "no item was compared")
    state = "pass" if Fraction(losses, compared) <= Fraction(limit) else "fail"
    return make("max_loss_rate", None, format_bar(limit), format_pct(losses, compared, limit), state, f"{losses} lost")


def drifted_runs(runs) -> list:
    """The runs whose judge drifted on its sentinels (finalize ended them ERROR)."""
    return [r for r in runs if RunFigures.of(r.metrics).drifted]
