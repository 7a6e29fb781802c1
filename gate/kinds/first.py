"""A compared prompt's first version, graded (``decision: {type: judge, judge: <pair judge>,
compare: live, first: {judge: <name>, pass: [...]}}``, issue 46.1): while the prompt has no
live version there is nothing to compare with, so submit pins the run the ``first`` rule
instead (``ComparedKind.first_version``; the pinned rule says ``first_version: true``, which
no prompt file may): the answer graded by that judge's live version exactly as a ``pass:``
prompt's is (``JudgedKind``: its figures, ``min_accuracy`` on the pass rate, corrected when
the mapping says so), with its bars. Once a version is live the comparison is used.

Its checks (``FirstKind.checks``): the judged kind's, except that the comparison's bars are
not applied (n/a, said why): there is no live version; no item was compared, so none counts
towards them. ``max_broken`` and ``max_drop`` are n/a as for any prompt's first version."""

from __future__ import annotations

from typing import Any

from gate.records.metrics import RunFigures, RunMetrics
from gate.verdict.bar_checks import BarCheck
from gate.verdict.bars import Bars
from gate.verdict.scoring import format_bar

from .judged import JudgedKind

FIRST_NOTE = "no live version yet: the first version is graded by the judge its prompt names for it (first:)"


class FirstKind(JudgedKind):
    name = "first"

    def judged_baseline(self, live: bool, bars: Bars) -> dict[str, Any]:
        """Nothing to compare with: max_broken and max_drop are n/a, as for any first version."""
        return {"baseline": None, "baseline_note": FIRST_NOTE}

    def checks(self, bars: Bars, metrics: RunMetrics, base_checks: list[BarCheck]) -> list[BarCheck]:
        """``min_accuracy`` as a graded run holds it; ``max_loss_rate`` and ``max_inconsistent``
        n/a: nothing was compared."""
        judged = RunFigures.of(metrics).judge
        if not judged:
            return base_checks
        out = [self.accuracy_check(bars, judged, c) if c.name == "min_accuracy" else c for c in base_checks]
        comparison = (("max_loss_rate", bars.judge.max_loss_rate), ("max_inconsistent", bars.judge.max_inconsistent))
        for name, limit in comparison:  # the comparison's bars: nothing was compared
            if limit is not None:
                out.append(BarCheck(name, None, format_bar(limit), None, "n/a", FIRST_NOTE))
        return out


FIRST = FirstKind()
