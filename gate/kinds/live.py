"""Comparing a run with live: not a kind, a small protocol every kind uses (``LiveComparison``),
over per-item outcomes summed as paired flips (fixed, broken, both right, both wrong, paired:
what ``max_broken``, ``max_drop`` and McNemar's test read, ``gate.report.update.comparison``).

Most kinds pair the candidate's item verdicts with live's answers on the same items
(``PairedItems``: reconcile counts the pairs in the database, ``workers.reconcile.
comparison_metrics``); a judge's ``compare: live`` reads both answers itself, so its wins
and losses are the flips (``JudgedPairs``)."""

from __future__ import annotations

from typing import Any, Protocol

from gate.records.metrics import RunFigures


class LiveComparison(Protocol):
    def compared(self, figures: RunFigures) -> dict[str, Any]:
        """reconcile: what the comparison adds to a run's figures beyond the paired items'
        flips (``{}``: those stand)."""
        ...


class PairedItems:
    """The item verdicts paired with live's: counted by reconcile, nothing to add."""

    def compared(self, figures: RunFigures) -> dict[str, Any]:
        return {}


class JudgedPairs:
    """A comparison by the judge: its wins and losses as the flips the bars read (ties split
    between both right and both wrong: the widest interval); with no live version, none."""

    def compared(self, figures: RunFigures) -> dict[str, Any]:
        pairwise = figures.judge.pairwise if figures.judge else None
        if pairwise is None:
            return {}
        if not pairwise.live:
            return {"flips": None, "baseline_note": "no live version to compare with", "baseline_error": None}
        ties = pairwise.ties
        flips = {
            "fixed": pairwise.wins,
            "broken": pairwise.losses,
            "both_right": ties - ties // 2,
            "both_wrong": ties // 2,
            "paired": pairwise.compared,
        }
        return {"flips": flips, "baseline_note": None, "baseline_error": None, "live": None}


PAIRED_ITEMS = PairedItems()
JUDGED_PAIRS = JudgedPairs()
