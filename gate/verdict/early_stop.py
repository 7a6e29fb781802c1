"""Early stop: when a run's verdict is settled before all its items are called.

A run is **settled** when no outcome of its remaining items could clear its bars. The bars
early stop judges are the ones its items' answers decide — ``min_accuracy``,
``max_broken``, ``max_drop``, ``min_recall`` and ``min_precision`` — and for each of them
"every remaining item answered right" is the best completion there is:

* accuracy, recall and precision of a label: a right answer adds to the hits and to the
  items counted; ``(h + r) / (n + r)`` is the largest a fraction of at most 1 can grow by
  ``r`` more items (precision: an item of another label answered right never adds to
  the label's answers, so no false positive either);
* ``max_broken``: an item answered right is never broken;
* ``max_drop``: a right answer turns a pair into "both right" or "fixed", never
  "broken" or "both wrong", and the lower limit of Newcombe's interval never falls when
  a pair's candidate answer turns right (``stats.paired_difference_interval``; checked
  for every table up to 45 pairs).

So a run is settled exactly when that one completion, ``best_case``, fails one of them:
then every completion fails it (tests/unit/test_settle.py holds this against a brute-force
search over every completion of the remaining items, thousands of random runs). It never
stops a run that could still pass. Latency and cost bars are not judged early (the calls
decide them, not the answers), and an item that ended ERROR is neither scored nor
remaining, as finalize counts it.

The figures come from a run's **tally** (``Outcomes``): items written back so far by
(verdict, expected label, answer, live's verdict on the same item), kept as running counts
in each write-back's own transaction (``store.stops.add_tally``): deciding costs one read of a
handful of rows per chunk however many items the run has scored — never a count over the
run's items. A tally may lag (a write-back whose lease was lost is not counted, nor an item
a sweep ended ERROR): a lagging tally makes more items look remaining, so it can only stop
later, never wrongly. ``max_broken`` and ``max_drop`` are judged early only against a live
run already finished when the run started (its verdicts are then known for every item);
one scored in the same update is still being scored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from gate.records.metrics import RunMetrics
from gate.states import Verdict

from .bar_checks import BarCheck, KindChecks, check, kept
from .bars import Bars
from .scoring import INVALID_DECISION

STOPPABLE = ("min_accuracy", "max_broken", "max_drop", "min_recall", "min_precision")
WRITTEN = (Verdict.MATCH, Verdict.MISMATCH, Verdict.ERROR)
NO_LIVE = ""  # a tally row's live verdict when no live run is paired


@dataclass(frozen=True)
class Outcomes:
    """A run's items as far as they are known. ``counts``: (verdict, expected label, the
    answer or None, live's verdict on the item or "") → items, for items written back
    MATCH, MISMATCH or ERROR; ``total``: the run's items (its dataset version's rows);
    ``label_totals``: the version's items per label; ``live_right``: of all ``total``
    items, how many the paired live run answered right (None: no live run to pair with,
    or not finished)."""

    total: int
    label_totals: Mapping[str, int]
    counts: Mapping[tuple[str, str, str | None, str], int] = field(default_factory=dict)
    live_right: int | None = None

    @classmethod
    def from_rows(
        cls,
        rows: Iterable[tuple[str, str, str | None, str, int]],
        total: int,
        label_totals: Mapping[str, int],
        live_right: int | None = None,
    ) -> Outcomes:
        counts: dict[tuple[str, str, str | None, str], int] = {}
        for verdict, expected, actual, live, n in rows:
            if verdict in WRITTEN and n:
                key = (str(verdict), expected, actual or None, live or NO_LIVE)
                counts[key] = counts.get(key, 0) + int(n)
        return cls(total, dict(label_totals), counts, live_right)

    @property
    def written(self) -> int:
        return sum(self.counts.values())

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.written)


def best_case(outcomes: Outcomes) -> dict[str, Any]:
    """The run's metrics (as finalize and reconcile write them: matches, scored,
    confusion, flips) if every remaining item were answered right."""
    confusion: dict[str, dict[str, int]] = {}
    done_per_label: dict[str, int] = {}
    matches = scored = 0
    for (verdict, expected, actual, _), n in outcomes.counts.items():
        label = expected.casefold()
        done_per_label[label] = done_per_label.get(label, 0) + n
        if verdict == Verdict.ERROR:
            continue
        answer = (actual or INVALID_DECISION).casefold()
        row = confusion.setdefault(label, {})
        row[answer] = row.get(answer, 0) + n
        scored += n
        matches += n if verdict == Verdict.MATCH else 0
    remaining, placed = outcomes.remaining, 0
    for label, items in _folded(outcomes.label_totals).items():
        left = max(0, items - done_per_label.get(label, 0))
        if left:
            row = confusion.setdefault(label, {})
            row[label] = row.get(label, 0) + left
            placed += left
    return {
        "total": outcomes.total,
        "matches": matches + remaining,
        "scored": scored + remaining,
        "confusion": confusion,
        "labels_complete": placed == remaining,
        **_best_flips(outcomes, remaining),
    }


def _folded(totals: Mapping[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for label, n in totals.items():
        out[label.casefold()] = out.get(label.casefold(), 0) + int(n)
    return out


def _best_flips(outcomes: Outcomes, remaining: int) -> dict[str, Any]:
    """The pairs with live if every remaining item were answered right: live right there →
    both right, live wrong → fixed. No live run (or figures that do not add up): none."""
    if outcomes.live_right is None:
        return {"flips": None}
    pairs = {"fixed": 0, "broken": 0, "both_right": 0, "both_wrong": 0}
    live_right_seen = 0
    for (verdict, _, _, live), n in outcomes.counts.items():
        if live not in (Verdict.MATCH, Verdict.MISMATCH):
            return {"flips": None}  # an item with no live answer: live is not complete
        live_right_seen += n if live == Verdict.MATCH else 0
        if verdict != Verdict.ERROR:
            right, live_ok = verdict == Verdict.MATCH, live == Verdict.MATCH
            key = ("both_right" if live_ok else "fixed") if right else ("broken" if live_ok else "both_wrong")
            pairs[key] += n
    left_right = outcomes.live_right - live_right_seen
    if not 0 <= left_right <= remaining:
        return {"flips": None}
    pairs["both_right"] += left_right
    pairs["fixed"] += remaining - left_right
    return {"flips": {**pairs, "paired": sum(pairs.values())}}


def settled(bars: Bars, outcomes: Outcomes, kind_checks: KindChecks = kept) -> list[BarCheck]:
    """The bars the run can no longer clear, whatever its remaining items answer (empty:
    it may still pass, or nothing remains to be saved). Each as ``check`` holds it against
    the best completion (``kind_checks``: the run's kind's checks)."""
    return missed_bars(bars, outcomes, kind_checks) if outcomes.remaining > 0 else []


def missed_bars(bars: Bars, outcomes: Outcomes, kind_checks: KindChecks = kept) -> list[BarCheck]:
    """The bars early stop judges that fail on the best completion (with nothing remaining:
    on the figures themselves), as the run's kind holds them (``kind_checks``). Reconcile
    confirms a stop with it on the final figures."""
    best = best_case(outcomes)
    judged = STOPPABLE if best["labels_complete"] else ("min_accuracy", "max_broken", "max_drop")
    return [
        c
        for c in check(bars, cast(RunMetrics, best), kind_checks)
        if c.name in judged and c.state == "fail" and c.value is not None
    ]


def explain(outcomes: Outcomes, missed: list[BarCheck]) -> str:
    """ "stopped after 140 of 1,000 items: even if every remaining item matched, accuracy
    would be at most 84.2 % < 90 %". The calls it saved are said once, in the update's calls
    line (``gate.report.text.spend_line``), from the run's final figures: a count here, taken
    when the stop was confirmed, could disagree with it (issue 49.4)."""
    clauses = "; ".join(_clause(c) for c in missed)
    return (
        f"stopped after {outcomes.written:,} of {outcomes.total:,} items: even if every remaining item matched, "
        f"{clauses}"
    )


def _spaced(text: str | None) -> str:
    text = text or ""  # a check a stop names has its value and its limit
    return text[:-1] + " %" if text.endswith("%") else text


def _clause(c: BarCheck) -> str:
    if c.name == "min_accuracy":
        return f"accuracy would be at most {_spaced(c.value)} < {_spaced(c.limit)}"
    if c.name in ("min_recall", "min_precision"):
        what = "recall" if c.name == "min_recall" else "precision"
        return f"{what} of {c.label} would be at most {_spaced(c.value)} < {_spaced(c.limit)}"
    if c.name == "max_broken":
        return f"{c.value} items would still be broken > max_broken {c.limit}"
    if c.reason == "inconclusive":  # "max_drop would be inconclusive: the difference could be as low as …"
        return f"max_drop would be {c.note}"
    return f"max_drop would be missed: {c.note}"
