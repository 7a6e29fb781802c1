"""The bars of a prompt × dataset, and how a finished run is held against them.

``min_accuracy`` is the bar every mapping has. The others are optional and all must clear
too: ``max_broken`` (items live answered right and the candidate wrong: 0 means "no
regression on this set"), ``min_recall`` / ``min_precision`` per label,
``max_latency_p95_ms`` and ``max_cost_per_1k_items``. A bar is compared unrounded (exact
fractions, as ``scoring.clears`` does for accuracy) and shown rounded.

A bar that cannot be computed for a run — ``max_broken`` with no live version scored on
the same dataset version, a cost with no price for the model — is "n/a — not applied":
it does not block, and the report says so. The bars a run is judged by are pinned with it
at submit (``pinned["bars"]``): a bar changed later does not change its verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, Mapping

from .errors import UsageError
from .scoring import clears, format_bar, format_pct, parse_bar

EXTRA_KEYS = ("max_broken", "min_recall", "min_precision", "max_latency_p95_ms", "max_cost_per_1k_items")
MAX_LABEL_BARS = 64


@dataclass(frozen=True)
class Bars:
    min_accuracy: Decimal
    max_broken: int | None = None
    min_recall: dict[str, Decimal] = field(default_factory=dict)
    min_precision: dict[str, Decimal] = field(default_factory=dict)
    max_latency_p95_ms: int | None = None
    max_cost_per_1k_items: Decimal | None = None

    @classmethod
    def parse(cls, min_accuracy: Any, extra: Mapping[str, Any] | None = None) -> "Bars":
        """From a gate config entry or `dataset map` options (untrusted shapes): each wrong
        value is one UsageError naming the bar."""
        extra = dict(extra or {})
        unknown = sorted(set(extra) - set(EXTRA_KEYS))
        if unknown:
            raise UsageError(f"unknown bar {unknown[0]!r}: use min_accuracy, {', '.join(EXTRA_KEYS)}")
        return cls(min_accuracy=parse_bar(min_accuracy),
                   max_broken=_count(extra.get("max_broken"), "max_broken"),
                   min_recall=_per_label(extra.get("min_recall"), "min_recall"),
                   min_precision=_per_label(extra.get("min_precision"), "min_precision"),
                   max_latency_p95_ms=_count(extra.get("max_latency_p95_ms"), "max_latency_p95_ms"),
                   max_cost_per_1k_items=_money(extra.get("max_cost_per_1k_items"), "max_cost_per_1k_items"))

    def extra(self) -> dict[str, Any] | None:
        """The bars beyond min_accuracy as JSON (prompt_dataset.bars, pinned["bars"]); None if none."""
        out: dict[str, Any] = {}
        if self.max_broken is not None:
            out["max_broken"] = self.max_broken
        if self.min_recall:
            out["min_recall"] = {k: str(v) for k, v in sorted(self.min_recall.items())}
        if self.min_precision:
            out["min_precision"] = {k: str(v) for k, v in sorted(self.min_precision.items())}
        if self.max_latency_p95_ms is not None:
            out["max_latency_p95_ms"] = self.max_latency_p95_ms
        if self.max_cost_per_1k_items is not None:
            out["max_cost_per_1k_items"] = str(self.max_cost_per_1k_items)
        return out or None

    def describe(self) -> list[str]:
        """One short phrase per bar beyond accuracy, for listings."""
        out = [] if self.max_broken is None else [f"max broken {self.max_broken}"]
        out += [f"recall[{k}] ≥ {format_bar(v)}" for k, v in sorted(self.min_recall.items())]
        out += [f"precision[{k}] ≥ {format_bar(v)}" for k, v in sorted(self.min_precision.items())]
        if self.max_latency_p95_ms is not None:
            out.append(f"p95 latency ≤ {self.max_latency_p95_ms} ms")
        if self.max_cost_per_1k_items is not None:
            out.append(f"cost ≤ ${self.max_cost_per_1k_items} per 1k items")
        return out


def _count(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        raise UsageError(f"{name} {value!r} is not a whole number ≥ 0")
    number = int(str(value).strip())
    if number > 10 ** 9:
        raise UsageError(f"{name} {value!r} is out of range: at most 1000000000")
    return number


def _money(value: Any, name: str) -> Decimal | None:
    if value is None:
        return None
    try:
        amount = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise UsageError(f"{name} {value!r} is not a number of US dollars") from None
    if not amount.is_finite() or amount < 0 or amount > 10 ** 9 or amount.as_tuple().exponent < -9:
        raise UsageError(f"{name} {value!r} is out of range: 0 to 1000000000 dollars, at most 9 decimals")
    return amount


def _per_label(value: Any, name: str) -> dict[str, Decimal]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UsageError(f"{name} must map a label to a fraction, e.g. {{urgent: 0.9}}")
    if len(value) > MAX_LABEL_BARS:
        raise UsageError(f"{name} names {len(value)} labels: at most {MAX_LABEL_BARS}")
    out = {}
    for label, bar in value.items():
        if not isinstance(label, str) or not label or len(label) > 128:
            raise UsageError(f"{name}: a label must be a non-empty string of at most 128 characters")
        out[label] = parse_bar(bar, f"{name}[{label[:60]}]")
    return out


def pinned_bars(pinned: Mapping[str, Any] | None, min_accuracy: Decimal) -> Bars:
    """The bars a run was submitted under (older runs pinned none beyond accuracy)."""
    extra = (pinned or {}).get("bars") or {}
    return Bars.parse(min_accuracy, extra)


# --- holding a finished run against its bars ------------------------------------------

@dataclass(frozen=True)
class BarCheck:
    """One bar against one run: ``state`` pass, fail or n/a (``note`` says why n/a)."""
    name: str                 # min_accuracy, max_broken, min_recall, ...
    label: str | None         # the label of a per-label bar
    limit: str                # the bar as shown: "90%", "0", "250 ms"
    value: str | None         # the run's figure as shown, None when n/a
    state: str
    note: str | None = None

    @property
    def title(self) -> str:
        return f"{self.name}[{self.label}]" if self.label is not None else self.name

    def to_dict(self) -> dict[str, Any]:
        return {"bar": self.name, "label": self.label, "limit": self.limit, "value": self.value, "state": self.state,
                "note": self.note}


def check(bars: Bars, metrics: Mapping[str, Any]) -> list[BarCheck]:
    """Every bar against a finished run's metrics (finalize's: matches, scored, confusion,
    and where computed flips, calls and cost)."""
    matches, scored = metrics.get("matches", 0), metrics.get("scored", 0)
    out = [BarCheck("min_accuracy", None, format_bar(bars.min_accuracy), format_pct(matches, scored),
                    "pass" if clears(matches, scored, bars.min_accuracy) else "fail")]
    if bars.max_broken is not None:
        flips = metrics.get("flips")
        if flips is None:
            out.append(BarCheck("max_broken", None, str(bars.max_broken), None, "n/a",
                                metrics.get("baseline_note") or "no live version scored on this dataset version"))
        else:
            out.append(BarCheck("max_broken", None, str(bars.max_broken), str(flips["broken"]),
                                "pass" if flips["broken"] <= bars.max_broken else "fail"))
    confusion = metrics.get("confusion") or {}
    for label, bar in sorted(bars.min_recall.items()):
        support = sum(confusion.get(label, {}).values())
        out.append(_fraction_check("min_recall", label, bar, confusion.get(label, {}).get(label, 0), support,
                                   f"no item expects {label!r}"))
    for label, bar in sorted(bars.min_precision.items()):
        answered = sum(row.get(label, 0) for row in confusion.values())
        out.append(_fraction_check("min_precision", label, bar, confusion.get(label, {}).get(label, 0), answered,
                                   f"the candidate never answered {label!r}"))
    if bars.max_latency_p95_ms is not None:
        p95 = ((metrics.get("calls") or {}).get("latency_ms") or {}).get("p95")
        out.append(BarCheck("max_latency_p95_ms", None, f"{bars.max_latency_p95_ms} ms",
                            None if p95 is None else f"{p95} ms",
                            "n/a" if p95 is None else ("pass" if p95 <= bars.max_latency_p95_ms else "fail"),
                            "no call was timed" if p95 is None else None))
    if bars.max_cost_per_1k_items is not None:
        cost = metrics.get("cost_per_1k_items")
        out.append(BarCheck("max_cost_per_1k_items", None, f"${bars.max_cost_per_1k_items}",
                            None if cost is None else f"${Decimal(cost):.4f}",
                            "n/a" if cost is None else (
                                "pass" if Decimal(cost) <= bars.max_cost_per_1k_items else "fail"),
                            "no price for the model in the gate's price table" if cost is None else None))
    return out


def _fraction_check(name: str, label: str, bar: Decimal, hits: int, of: int, empty: str) -> BarCheck:
    """A per-label bar: ``hits``/``of`` against ``bar``, exact; n/a (not a fail) when ``of`` is 0."""
    if of == 0:
        return BarCheck(name, label, format_bar(bar), None, "n/a", empty)
    return BarCheck(name, label, format_bar(bar), format_pct(hits, of),
                    "pass" if Fraction(hits, of) >= Fraction(bar) else "fail")
