"""The bars and settings of a mapping that only a judged run reads (gate/prompt/judge.py),
parsed from untrusted config and pinned with the run like every bar:

* ``judge_corrected: true``: ``min_accuracy`` bars the pass rate corrected for the judge's
  own error rates (Rogan–Gladen, ``gate.verdict.judge_stats``) instead of the pass rate as
  judged. A corrected rate that cannot be had (the judge's pinned figures lack a passing
  or a failing human label, or its sensitivity + specificity ≤ 1) fails the bar.
* ``max_loss_rate``: a comparison against live (``compare: live``): at most this share of
  items lost (both orders agree the live answer is better).
* ``max_inconsistent``: a comparison against live: at most this share of the items
  compared may be position-inconsistent (the two orders disagree; default 0.10). Above
  it the run is inconclusive (the judge cannot order these answers): never a pass.
* ``min_judge_j``, ``min_judge_kappa``, ``min_judge_items``: the floors the judge's
  agreement with the humans must clear (``gate.verdict.judge_floors``): at submit for a
  judged candidate, at its own gate for a judge.
* ``sentinels``: how many of the judge's human-labelled items are mixed into the run's
  judging calls, spread over the run (default 40, at most 200, at most the judge's
  evaluated rows; 0: none). 40 is what a drift over the last quarter of a run needs
  (``gate.verdict.sentinel_drift``): a judge pinned at 93 % of 200 items that flips its
  verdicts there is caught with probability 0.998 (with 20 sentinels, 0.72), at most 1 %
  false alarms; a mapping raises it for more power.

A comparison's ``min_accuracy`` bars the share of the items compared that the judge
consistently did not lose (wins and ties on which both orders agree: a position-inconsistent
item never counts as not lost), and its ``max_drop`` and ``max_broken`` read the wins and losses as the comparison with
live reads fixed and broken items. With no live version to compare with nothing was
compared: ``min_accuracy`` and ``max_loss_rate`` cannot be judged and fail the run (never a
pass on a comparison that did not happen), and the report says why. The checks these bars
make are the kinds' (``JudgedKind.checks``, ``ComparedKind.checks`` in gate.kinds), which
``gate.verdict.bar_checks.check`` is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gate.errors import UsageError
from gate.records.metrics import RunFigures

from .judge_floors import KEYS as FLOOR_KEYS
from .judge_floors import JudgeFloors
from .scoring import format_bar, parse_bar

KEYS = ("judge_corrected", "max_loss_rate", "max_inconsistent", "sentinels", *FLOOR_KEYS)
DEFAULT_SENTINELS = 40  # the power a late drift needs: gate.verdict.sentinel_drift
MAX_SENTINELS = 200
DEFAULT_MAX_INCONSISTENT = Decimal("0.10")


@dataclass(frozen=True)
class JudgeBars:
    corrected: bool = False
    max_loss_rate: Decimal | None = None
    sentinels: int = DEFAULT_SENTINELS
    max_inconsistent: Decimal = DEFAULT_MAX_INCONSISTENT
    floors: JudgeFloors = JudgeFloors()  # what the judge's agreement must clear

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
        inconsistent = extra.get("max_inconsistent")
        return cls(
            corrected,
            None if loss is None else parse_bar(loss, "max_loss_rate"),
            sentinels,
            DEFAULT_MAX_INCONSISTENT if inconsistent is None else parse_bar(inconsistent, "max_inconsistent"),
            JudgeFloors.parse(extra),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"judge_corrected": True} if self.corrected else {}
        if self.max_loss_rate is not None:
            out["max_loss_rate"] = f"{self.max_loss_rate:f}"
        if self.sentinels != DEFAULT_SENTINELS:
            out["sentinels"] = self.sentinels
        if self.max_inconsistent != DEFAULT_MAX_INCONSISTENT:
            out["max_inconsistent"] = f"{self.max_inconsistent:f}"
        return {**out, **self.floors.to_json()}

    def describe(self) -> list[str]:
        out = ["bars the judge-corrected pass rate"] if self.corrected else []
        if self.max_loss_rate is not None:
            out.append(f"losses vs live ≤ {format_bar(self.max_loss_rate)}")
        if self.sentinels != DEFAULT_SENTINELS:
            out.append(f"{self.sentinels} sentinels")
        if self.max_inconsistent != DEFAULT_MAX_INCONSISTENT:
            out.append(f"position-inconsistent ≤ {format_bar(self.max_inconsistent)}")
        return out + self.floors.describe()


def drifted_runs(runs) -> list:
    """The runs whose judge drifted on its sentinels (finalize ended them ERROR)."""
    return [r for r in runs if RunFigures.of(r.metrics).drifted]
