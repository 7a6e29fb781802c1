"""A finished run held against its bars (gate/verdict/bars.py): one ``BarCheck`` per bar.

``max_drop`` is a non-inferiority bar against live: the candidate clears it when the lower
end of the confidence interval of the paired difference (candidate − live on the same
items, ``stats.paired_difference_interval``, at the mapping's ``confidence``) is at least
−``max_drop``. An interval that straddles the limit fails as "inconclusive" (the dataset
cannot tell whether the drop is within it), one wholly below it as "missed". A bar is
compared unrounded (exact fractions, as ``scoring.clears`` does for accuracy) and shown
rounded.

A bar that does not apply to a run — ``max_broken`` with no live version yet, a label
this dataset version has no item of, no timed call — is "n/a — not applied": it does not
block, and the report says so. A bar that applies but cannot be computed for a reason a
pull request could choose — a model with no price, answers without token counts, live
answers that should exist and cannot be had — fails: a pull request must never be able
to switch a bar off. Labels compare case-insensitively, as answers do.

A kind may hold a run to its bars its own way (a judged run's ``min_accuracy`` on the
corrected pass rate, a comparison's ``max_loss_rate``): ``check`` takes the kind's checks
(``KindChecks``, ``DecisionKind.checks`` in gate.kinds, a floor above) as an argument and
hands them the checks every kind makes; ``kept``, the default, keeps them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import Any

from gate.records.metrics import RunFigures, RunMetrics

from .bars import Bars
from .reasons import kinds_text
from .scoring import clears, format_bar, format_pct
from .stats import paired_difference_interval

MINUS = "\u2212"


@dataclass(frozen=True)
class BarCheck:
    """One bar against one run: ``state`` pass, fail, n/a, or pending (the comparison with
    live is made when every run has finished); ``note`` says why when it is not plain."""

    name: str  # min_accuracy, max_broken, min_recall, ...
    label: str | None  # the label of a per-label bar
    limit: str  # the bar as shown: "90%", "0", "250 ms"
    value: str | None  # the run's figure as shown, None when n/a
    state: str
    note: str | None = None
    reason: str | None = None  # a fail's: "missed", or "inconclusive" (the interval straddles the limit)
    interval: tuple[float, float] | None = None  # max_drop: the paired difference's interval (fractions)
    conclusive: bool | None = None  # max_drop: the interval lies wholly on one side of the limit
    slice_of: str | None = None  # a slice's min_slice_accuracy: the column (its label names the value too)

    @property
    def title(self) -> str:
        return f"{self.name}[{self.label}]" if self.label is not None else self.name

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "bar": self.name,
            "label": self.label,
            "limit": self.limit,
            "value": self.value,
            "state": self.state,
            "note": self.note,
            "reason": self.reason if self.reason else ("missed" if self.state == "fail" else None),
        }
        if self.name == "max_drop":
            out.update(interval=list(self.interval) if self.interval else None, conclusive=self.conclusive)
        return out


# A kind's checks: (the run's bars, its metrics, the checks every kind makes) -> the run's checks.
KindChecks = Callable[[Bars, RunMetrics, list["BarCheck"]], list["BarCheck"]]


def kept(bars: Bars, metrics: RunMetrics, checks: list[BarCheck]) -> list[BarCheck]:
    """The checks of a kind that makes none of its own: every kind's, unchanged."""
    return checks


def check(bars: Bars, metrics: RunMetrics, kind_checks: KindChecks = kept) -> list[BarCheck]:
    """Every bar against a finished run's metrics (finalize's: matches, scored, confusion,
    and where computed flips, calls and cost), as the run's kind holds them (``kind_checks``:
    its ``DecisionKind.checks``)."""
    matches, scored = metrics.get("matches", 0), metrics.get("scored", 0)
    errors, total = metrics.get("errors", 0), metrics.get("total", 0)
    out = [
        BarCheck(
            "min_accuracy",
            None,
            format_bar(bars.min_accuracy),
            format_pct(matches, scored, bars.min_accuracy),
            "pass" if clears(matches, scored, bars.min_accuracy) else "fail",
            f"of the {scored:,} items scored; {errors:,} could not be scored" if errors else None,
        )
    ]
    if bars.max_error_rate or errors:
        out.append(error_rate_check(bars.max_error_rate, errors, total, metrics.get("error_kinds")))
    if bars.max_broken is not None:
        out.append(_broken_check(bars.max_broken, metrics))
    out += label_checks(bars, metrics)
    if bars.max_latency_p95_ms is not None:
        calls = RunFigures.of(metrics).calls
        p95 = calls.p95_ms if calls else None
        out.append(
            BarCheck(
                "max_latency_p95_ms",
                None,
                f"{bars.max_latency_p95_ms} ms",
                None if p95 is None else f"{p95} ms",
                "n/a" if p95 is None else ("pass" if p95 <= bars.max_latency_p95_ms else "fail"),
                "no call was timed" if p95 is None else None,
            )
        )
    if bars.max_cost_per_1k_items is not None:
        out.append(_cost_check(bars.max_cost_per_1k_items, metrics))
    if bars.max_drop is not None:
        out.append(drop_check(bars.max_drop, bars.confidence, metrics))
    return kind_checks(bars, metrics, out + item_checks(bars, metrics))


def error_rate_check(limit: Decimal, errors: int, total: int, kinds: Mapping[str, int] | None) -> BarCheck:
    """The error budget: at most ``limit`` of the run's items ended ERROR (compared exactly).
    The errors were counted apart: every other bar is computed on the items scored. The
    note says how many and of which kinds, never which (``gate.verdict.reasons``)."""
    by_kind = f" ({kinds_text(kinds)})" if kinds else ""
    within = total > 0 and Fraction(errors, total) <= Fraction(limit)
    return BarCheck(
        "max_error_rate",
        None,
        format_bar(limit),
        format_pct(errors, total, limit),
        "pass" if within else "fail",
        f"{errors:,} of {total:,} items could not be scored{by_kind}; see the failing items" if errors else None,
    )


def label_checks(bars: Bars, metrics: RunMetrics) -> list[BarCheck]:
    """``min_recall`` and ``min_precision`` per label, over the run's confusion matrix."""
    out = []
    confusion = _folded(metrics.get("confusion") or {})
    for label, bar in sorted(bars.min_recall.items()):
        row = confusion.get(label.casefold(), {})
        out.append(
            _fraction_check(
                "min_recall",
                label,
                bar,
                row.get(label.casefold(), 0),
                sum(row.values()),
                f"this dataset version has no item labelled {label!r}",
            )
        )
    for label, bar in sorted(bars.min_precision.items()):
        answered = sum(row.get(label.casefold(), 0) for row in confusion.values())
        hits = confusion.get(label.casefold(), {}).get(label.casefold(), 0)
        if answered == 0:  # no answer was this label: no false positive either
            out.append(
                BarCheck(
                    "min_precision",
                    label,
                    format_bar(bar),
                    None,
                    "pass",
                    f"the candidate never answered {label!r}: no false positive",
                )
            )
        else:
            out.append(_fraction_check("min_precision", label, bar, hits, answered, ""))
    return out


def _folded(confusion: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """The confusion matrix with labels casefolded (labels compare case-insensitively: a
    prompt may spell them ``URGENT`` where the bar says ``urgent``)."""
    out: dict[str, dict[str, int]] = {}
    for expected, row in confusion.items():
        folded = out.setdefault(expected.casefold(), {})
        for actual, n in row.items():
            folded[actual.casefold()] = folded.get(actual.casefold(), 0) + n
    return out


def _broken_check(limit: int, metrics: RunMetrics) -> BarCheck:
    """Items live got right and the candidate wrong, at most ``limit``. Not yet compared
    (reconcile pairs the answers when every run is done): pending. No live version: n/a.
    Live answers that should exist and cannot be had: a fail, never a silent n/a."""
    if "flips" not in metrics:
        return BarCheck(
            "max_broken",
            None,
            str(limit),
            None,
            "pending",
            "compared with the live version once every run has finished",
        )
    flips = metrics["flips"]
    if flips is None and metrics.get("baseline_error"):
        return BarCheck("max_broken", None, str(limit), None, "fail", metrics["baseline_error"])
    if flips is None:
        return BarCheck("max_broken", None, str(limit), None, "n/a", metrics.get("baseline_note") or "no live version")
    accepted = accepted_broken(metrics)
    broken = flips["broken"] - accepted
    return BarCheck(
        "max_broken",
        None,
        str(limit),
        str(broken),
        "pass" if broken <= limit else "fail",
        f"{flips['broken']} broken, {accepted} of them accepted (accept_breaks)" if accepted else None,
    )


def accepted_broken(metrics: RunMetrics) -> int:
    """How many of the run's broken items the mapping accepts breaking (``accept_breaks``)."""
    return sum(1 for a in metrics.get("accepted_breaks") or () if a.get("state") == "broke")


def _cost_check(limit: Decimal, metrics: RunMetrics) -> BarCheck:
    """Cost per 1,000 items at the price pinned at submit, compared exactly
    (cost × 1000 ≤ limit × items). A cost that cannot be computed — the model has no
    price, or answers came without token counts — fails: the pull request chooses the
    model, so it must not be able to switch the bar off."""
    shown = f"${limit:f}"
    usd = metrics.get("cost_usd")
    if usd is None:
        return BarCheck(
            "max_cost_per_1k_items",
            None,
            shown,
            None,
            "fail",
            metrics.get("cost_note") or "no price for the model in the gate's price table",
        )
    cost, total = Fraction(Decimal(usd)), metrics.get("total", 0)
    per_1k = float(cost * 1000 / total) if total else 0.0
    return BarCheck(
        "max_cost_per_1k_items",
        None,
        shown,
        f"${per_1k:.4f}",
        "pass" if cost * 1000 <= Fraction(limit) * total else "fail",
    )


def _fraction_check(name: str, label: str, bar: Decimal, hits: int, of: int, empty: str) -> BarCheck:
    """A per-label bar: ``hits``/``of`` against ``bar``, exact; n/a (not a fail) when ``of`` is 0."""
    if of == 0:
        return BarCheck(name, label, format_bar(bar), None, "n/a", empty)
    return BarCheck(
        name,
        label,
        format_bar(bar),
        format_pct(hits, of, bar),
        "pass" if Fraction(hits, of) >= Fraction(bar) else "fail",
    )


def drop_check(max_drop: Decimal, confidence: Decimal, metrics: RunMetrics) -> BarCheck:
    """The non-inferiority bar: the lower end of the paired difference's interval (candidate
    − live on the same items) at least −``max_drop`` points, compared exactly (the float
    limit as the exact fraction it is). Wholly below: missed; straddling: inconclusive.
    Pending, n/a and uncomputable as ``max_broken`` (``_broken_check``)."""
    limit = f"{MINUS}{max_drop.normalize():f} pts" if max_drop else "0 pts"
    if metrics.get("flips") is None:  # not compared yet, no live version, or its answers missing
        return replace(_broken_check(0, metrics), name="max_drop", limit=limit)
    found = paired_difference(metrics, confidence)
    if found is None:
        return BarCheck("max_drop", None, limit, None, "n/a", "no item was answered by both")
    theta, low, high = found
    bound = -Fraction(max_drop) / 100
    shown = f"{points(theta)} pts [{points(low, bound)}, {points(high, bound)}]"
    if Fraction(low) >= bound:
        return BarCheck("max_drop", None, limit, shown, "pass", interval=(low, high), conclusive=True)
    if Fraction(high) < bound:
        return BarCheck(
            "max_drop",
            None,
            limit,
            shown,
            "fail",
            f"the difference is at most {points(high, bound)} pts; the limit is {limit_text(max_drop)}",
            "missed",
            (low, high),
            True,
        )
    return BarCheck(
        "max_drop",
        None,
        limit,
        shown,
        "fail",
        f"inconclusive: the difference could be as low as "
        f"{points(low, bound)} pts; the limit is {limit_text(max_drop)}",
        "inconclusive",
        (low, high),
        False,
    )


def paired_difference(metrics: RunMetrics, confidence: Decimal) -> tuple[float, float, float] | None:
    """(difference, low, high) of the run's paired answers against live (its ``flips``), or
    None when there are none."""
    flips = metrics.get("flips")
    if not flips or not flips.get("paired"):
        return None
    return paired_difference_interval(
        flips["both_right"], flips["fixed"], flips["broken"], flips["both_wrong"], float(confidence)
    )


def limit_text(max_drop: Decimal) -> str:
    """−max_drop as the report says it: "−2"."""
    return f"{MINUS}{max_drop.normalize():f}" if max_drop else "0"


def points(fraction: float, bound: Fraction | None = None) -> str:
    """A difference (a fraction) in accuracy points with one decimal and its sign ("−3.4",
    "+0.9", "0.0"); against ``bound``, with as many more decimals as keep the printed
    number on the same side of the bound as the exact one (−2.04 against −2 is "−2.04")."""
    exact = Fraction(fraction) * 100
    for digits in range(1, 7):
        shown = Decimal(fraction * 100).quantize(Decimal(1).scaleb(-digits), ROUND_HALF_EVEN)
        if bound is None or (Fraction(shown) >= bound * 100) == (exact >= bound * 100):
            break
    if shown == 0:
        return f"{abs(shown)}"
    return f"{MINUS}{abs(shown)}" if shown < 0 else f"+{shown}"


# --- bars of a fields decision, of slices, and protected items ------------------------------


def item_checks(bars: Bars, metrics: RunMetrics) -> list[BarCheck]:
    """``min_field_accuracy`` per field, ``min_slice_accuracy`` and the protected items."""
    out = [_field_check(name, bar, metrics) for name, bar in sorted(bars.min_field_accuracy.items())]
    if bars.min_slice_accuracy is not None:
        out += _slice_checks(bars, metrics)
    protected = _protected_check(bars, metrics)
    return out + ([protected] if protected else [])


def _field_check(name: str, bar: Decimal, metrics: RunMetrics) -> BarCheck:
    """One field's accuracy over the items scored (a tool call's argument: over the items
    whose expected call has it, ``compared``). A candidate that does not decide this field
    (or no field at all) fails: a pull request must not drop a field to drop its bar."""
    figures = metrics.get("fields") or {}
    found = next((f for f in figures.get("fields") or () if f["field"] == name), None)
    if found is None:
        why = (
            f"the candidate's decision has no field {name!r}"
            if figures
            else "the candidate does not decide field by field (decision: {type: fields})"
        )
        return BarCheck("min_field_accuracy", name, format_bar(bar), None, "fail", why)
    of = found.get("compared", figures["items"])
    return _fraction_check("min_field_accuracy", name, bar, found["right"], of, "no item was scored")


def _slice_checks(bars: Bars, metrics: RunMetrics) -> list[BarCheck]:
    """Every slice of at least ``slice_items`` items against the bar: one failing check per
    slice that misses it, else one passing check (its value: the lowest slice). Asked only
    of bars with a min_slice_accuracy."""
    bar = bars.min_slice_accuracy
    assert bar is not None
    limit, column = format_bar(bar), bars.policy.slice_by
    if "slices" not in metrics:
        return [BarCheck("min_slice_accuracy", column, limit, None, "pending", "sliced once every run has finished")]
    sliced = metrics["slices"]
    if sliced.get("too_many"):
        return [
            BarCheck(
                "min_slice_accuracy",
                column,
                limit,
                None,
                "fail",
                f"{column} has over {len(sliced['slices'])} distinct values: not a column to slice by",
            )
        ]
    judged = [s for s in sliced["slices"] if s["items"] >= bars.slice_items]
    if not judged:
        return [
            BarCheck(
                "min_slice_accuracy", column, limit, None, "n/a", f"no slice of {column} has {bars.slice_items} items"
            )
        ]
    failing = [s for s in judged if Fraction(s["matches"], s["items"]) < Fraction(bar)]
    if failing:
        return [
            BarCheck(
                "min_slice_accuracy",
                f"{column}={slice_name(s['value'])}",
                limit,
                format_pct(s["matches"], s["items"], bar),
                "fail",
                f"{s['matches']} of {s['items']} items",
                slice_of=column,
            )
            for s in failing
        ]
    low = min(judged, key=lambda s: Fraction(s["matches"], s["items"]))
    small = len(sliced["slices"]) - len(judged)
    return [
        BarCheck(
            "min_slice_accuracy",
            column,
            limit,
            format_pct(low["matches"], low["items"], bar),
            "pass",
            f"{len(judged)} slice{'s' if len(judged) != 1 else ''} judged, the lowest {slice_name(low['value'])}"
            + (f"; {small} too small to judge" if small else ""),
        )
    ]


def slice_name(value: Any) -> str:
    return "(none)" if value is None else str(value)


def _protected_check(bars: Bars, metrics: RunMetrics) -> BarCheck | None:
    """Protected items (the dataset's protected rows, the mapping's ``protected`` ids): any
    that live answered right and the candidate wrong, unless accepted, fails. None when
    the run has no protected item."""
    protected = metrics.get("protected")
    if "flips" not in metrics:
        return (
            BarCheck(
                "protected", None, "0", None, "pending", "compared with the live version once every run has finished"
            )
            if bars.policy.protected
            else None
        )
    if not protected or not protected.get("items"):
        return None
    flips = metrics["flips"]
    if flips is None:
        if metrics.get("baseline_error"):
            return BarCheck("protected", None, "0", None, "fail", metrics["baseline_error"])
        return BarCheck("protected", None, "0", None, "n/a", metrics.get("baseline_note") or "no live version")
    broken = protected["broken"]
    items = f"{protected['items']} protected item{'s' if protected['items'] != 1 else ''}"
    if not broken:
        return BarCheck("protected", None, "0", "0", "pass", f"{items}, none broke")
    # which ones: the report's protected items (a holdout's for admin only), never this note
    return BarCheck("protected", None, "0", str(broken), "fail", f"{broken} of {items} broke")
