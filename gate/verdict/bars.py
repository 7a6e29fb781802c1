"""The bars of a prompt × dataset: what a mapping declares, parsed from untrusted config.

``min_accuracy`` is the bar every mapping has. The others are optional and all must clear
too: ``max_broken`` (items live answered right and the candidate wrong: 0 means "no
regression on this set"), ``min_recall`` / ``min_precision`` per label,
``max_latency_p95_ms``, ``max_cost_per_1k_items``, and ``max_drop``: a non-inferiority bar
against live, in accuracy points, judged at the mapping's ``confidence`` (0.95 by
default). ``max_error_rate`` (0 by default) is the error budget: the share of items that
may end ERROR — unscorable after every attempt — with the run still judged on the items
scored (errors are counted apart, never as matches); above it, or at 0 with one error,
the run ends ERROR and its update FAILED. A mapping also says whether its runs may stop
early (``early_stop``, on by default: gate/verdict/early_stop.py); that is a setting, not a
bar, kept with the bars so that it is pinned with them. The bars a run is judged by are pinned with it at submit
(``pinned["bars"]``): a bar changed later does not change its verdict. How a finished run
is held against them: gate/verdict/bar_checks.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, cast

from gate.errors import UsageError
from gate.records.pinned import Pinned

from .item_policy import KEYS as POLICY_KEYS
from .item_policy import ItemPolicy
from .judge_bars import KEYS as JUDGE_KEYS
from .judge_bars import JudgeBars
from .reasons import plain_bar
from .scoring import decimal_places, format_bar, parse_bar

EXTRA_KEYS = (
    "max_broken",
    "min_recall",
    "min_precision",
    "max_latency_p95_ms",
    "max_cost_per_1k_items",
    "max_drop",
    "confidence",
    "early_stop",
    "max_error_rate",
)
# bars of a fields decision and of slices, and what a mapping says of items (gate.verdict.item_policy)
ITEM_KEYS = ("min_field_accuracy", "min_slice_accuracy", "min_slice_items", *POLICY_KEYS, *JUDGE_KEYS, "min_check_rate")
MAX_LABEL_BARS = 64
DEFAULT_SLICE_ITEMS = 20
DEFAULT_CONFIDENCE = Decimal("0.95")


@dataclass(frozen=True)
class Bars:
    min_accuracy: Decimal
    max_broken: int | None = None
    min_recall: dict[str, Decimal] = field(default_factory=dict)
    min_precision: dict[str, Decimal] = field(default_factory=dict)
    max_latency_p95_ms: int | None = None
    max_cost_per_1k_items: Decimal | None = None
    min_field_accuracy: dict[str, Decimal] = field(default_factory=dict)
    min_check_rate: dict[str, Decimal] = field(default_factory=dict)  # per check (gate.kinds.checks)
    min_slice_accuracy: Decimal | None = None
    min_slice_items: int | None = None
    policy: ItemPolicy = ItemPolicy()
    max_drop: Decimal | None = None  # accuracy points live may lose, at the lower end of the interval
    confidence: Decimal = DEFAULT_CONFIDENCE  # of the paired difference's interval
    early_stop: bool = True  # a run may stop once no outcome of its rest could clear its bars
    judge: JudgeBars = JudgeBars()  # what only a judged run reads (gate.verdict.judge_bars)
    max_error_rate: Decimal = Decimal(0)  # the share of items that may end ERROR (unscored) and the run still judged

    @classmethod
    def parse(cls, min_accuracy: Any, extra: Mapping[str, Any] | None = None) -> Bars:
        """From a gate config entry or `dataset map` options (untrusted shapes): each wrong
        value is one UsageError naming the bar."""
        extra = dict(extra or {})
        unknown = sorted(set(extra) - set(EXTRA_KEYS) - set(ITEM_KEYS))
        if unknown:
            raise UsageError(f"unknown bar {unknown[0]!r}: use min_accuracy, {', '.join(EXTRA_KEYS + ITEM_KEYS)}")
        return cls(
            min_accuracy=parse_bar(min_accuracy),
            max_broken=_count(extra.get("max_broken"), "max_broken"),
            min_recall=_per_label(extra.get("min_recall"), "min_recall"),
            min_precision=_per_label(extra.get("min_precision"), "min_precision"),
            max_latency_p95_ms=_count(extra.get("max_latency_p95_ms"), "max_latency_p95_ms"),
            max_cost_per_1k_items=_money(extra.get("max_cost_per_1k_items"), "max_cost_per_1k_items"),
            max_drop=_points(extra.get("max_drop")),
            confidence=_confidence(extra.get("confidence")),
            early_stop=_flag(extra.get("early_stop"), "early_stop"),
            judge=JudgeBars.parse(extra),
            max_error_rate=_error_rate(extra.get("max_error_rate")),
            **_item_bars(extra),
        )

    def extra(self) -> dict[str, Any] | None:
        """The bars beyond min_accuracy as JSON (prompt_dataset.bars, pinned["bars"]); None if none."""
        out: dict[str, Any] = {}
        if self.max_broken is not None:
            out["max_broken"] = self.max_broken
        if self.min_recall:
            out["min_recall"] = {k: f"{v:f}" for k, v in sorted(self.min_recall.items())}
        if self.min_precision:
            out["min_precision"] = {k: f"{v:f}" for k, v in sorted(self.min_precision.items())}
        if self.max_latency_p95_ms is not None:
            out["max_latency_p95_ms"] = self.max_latency_p95_ms
        if self.max_cost_per_1k_items is not None:
            out["max_cost_per_1k_items"] = f"{self.max_cost_per_1k_items:f}"
        if self.max_drop is not None:
            out["max_drop"] = f"{self.max_drop:f}"
        if self.confidence != DEFAULT_CONFIDENCE:
            out["confidence"] = f"{self.confidence:f}"
        if not self.early_stop:
            out["early_stop"] = False
        if self.max_error_rate:
            out["max_error_rate"] = f"{self.max_error_rate:f}"
        out.update(self._item_extra())
        return out or None

    def _item_extra(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.min_field_accuracy:
            out["min_field_accuracy"] = {k: f"{v:f}" for k, v in sorted(self.min_field_accuracy.items())}
        if self.min_check_rate:
            out["min_check_rate"] = {k: f"{v:f}" for k, v in sorted(self.min_check_rate.items())}
        if self.min_slice_accuracy is not None:
            out["min_slice_accuracy"] = f"{self.min_slice_accuracy:f}"
        if self.min_slice_items is not None:
            out["min_slice_items"] = self.min_slice_items
        return {**out, **self.policy.to_json(), **self.judge.to_json()}

    @property
    def slice_items(self) -> int:
        """Items a slice needs before ``min_slice_accuracy`` judges it."""
        return DEFAULT_SLICE_ITEMS if self.min_slice_items is None else self.min_slice_items

    def describe(self) -> list[str]:
        """One short phrase per bar beyond accuracy, for listings."""
        out = [] if self.max_broken is None else [f"max broken {self.max_broken}"]
        out += [f"recall[{k}] ≥ {format_bar(v)}" for k, v in sorted(self.min_recall.items())]
        out += [f"precision[{k}] ≥ {format_bar(v)}" for k, v in sorted(self.min_precision.items())]
        if self.max_latency_p95_ms is not None:
            out.append(f"p95 latency ≤ {self.max_latency_p95_ms} ms")
        if self.max_cost_per_1k_items is not None:
            out.append(f"cost ≤ ${self.max_cost_per_1k_items:f} per 1k items")
        out += [
            f"{plain_bar('min_field_accuracy', k)} ≥ {format_bar(v)}"
            for k, v in sorted(self.min_field_accuracy.items())
        ]
        out += [f"{plain_bar('min_check_rate', k)} ≥ {format_bar(v)}" for k, v in sorted(self.min_check_rate.items())]
        if self.min_slice_accuracy is not None:
            out.append(f"every slice of ≥ {self.slice_items} items ≥ {format_bar(self.min_slice_accuracy)}")
        if self.max_drop is not None:
            out.append(f"max drop {self.max_drop.normalize():f} pts")
        if self.confidence != DEFAULT_CONFIDENCE:
            out.append(f"confidence {format_bar(self.confidence)}")
        if not self.early_stop:
            out.append("early stop off")
        if self.max_error_rate:
            out.append(f"at most {format_bar(self.max_error_rate)} of items unscorable")
        return out + self.policy.describe() + self.judge.describe()


def _count(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not re.fullmatch(r"[0-9]+", str(value).strip()):
        raise UsageError(f"{name} {value!r} is not a whole number ≥ 0")
    number = int(str(value).strip())
    if number > 10**9:
        raise UsageError(f"{name} {value!r} is out of range: at most 1000000000")
    return number


def _money(value: Any, name: str) -> Decimal | None:
    if value is None:
        return None
    try:
        amount = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise UsageError(f"{name} {value!r} is not a number of US dollars") from None
    if not amount.is_finite() or amount < 0 or amount > 10**9 or decimal_places(amount) > 9:
        raise UsageError(f"{name} {value!r} is out of range: 0 to 1000000000 dollars, at most 9 decimals")
    return amount


def _points(value: Any) -> Decimal | None:
    """max_drop: accuracy points (2 = two points of accuracy), 0 to 100."""
    if value is None:
        return None
    try:
        points = Decimal(str(value).strip()) if not isinstance(value, bool) else Decimal("NaN")
    except (InvalidOperation, ValueError):
        raise UsageError(f"max_drop {value!r} is not a number of accuracy points, e.g. 2") from None
    if not points.is_finite() or points < 0 or points > 100 or decimal_places(points) > 9:
        raise UsageError(
            f"max_drop {value!r} is out of range: 0 to 100 accuracy points (2 = two points, not 0.02), "
            "at most 9 decimals"
        )
    return points


def _confidence(value: Any) -> Decimal:
    if value is None:
        return DEFAULT_CONFIDENCE
    confidence = parse_bar(value, "confidence")
    if not Decimal("0.5") <= confidence < 1:
        raise UsageError(f"confidence {value!r} is out of range: at least 0.5 and below 1, e.g. 0.95")
    return confidence


def _error_rate(value: Any) -> Decimal:
    """max_error_rate: the share of a run's items that may end ERROR, a fraction in [0, 1)
    (0, the default: one item that cannot be scored fails the update)."""
    if value is None:
        return Decimal(0)
    rate = parse_bar(value, "max_error_rate")
    if rate >= 1:
        raise UsageError(f"max_error_rate {value!r} is out of range: below 1 (a run needs an item scored), e.g. 0.02")
    return rate


def _flag(value: Any, name: str) -> bool:
    if value is None:
        return True
    if not isinstance(value, bool):
        raise UsageError(f"{name} {value!r} is not true or false")
    return value


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


def _item_bars(extra: Mapping[str, Any]) -> dict[str, Any]:
    """The bars of a fields decision and of slices, and the mapping's item policy."""
    policy = ItemPolicy.parse(extra)
    slice_bar = extra.get("min_slice_accuracy")
    slice_items = _count(extra.get("min_slice_items"), "min_slice_items")
    if (slice_bar is not None or slice_items is not None) and policy.slice_by is None:
        raise UsageError("min_slice_accuracy and min_slice_items need slice_by: the column whose values are the slices")
    if slice_items == 0:
        raise UsageError("min_slice_items 0 is out of range: a slice needs at least 1 item to be judged")
    return {
        "min_field_accuracy": _per_field(extra.get("min_field_accuracy")),
        "min_check_rate": _per_field(extra.get("min_check_rate"), "min_check_rate", "check"),
        "min_slice_accuracy": None if slice_bar is None else parse_bar(slice_bar, "min_slice_accuracy"),
        "min_slice_items": slice_items,
        "policy": policy,
    }


def _per_field(value: Any, bar_name: str = "min_field_accuracy", what: str = "field") -> dict[str, Decimal]:
    """A bar per field (``min_field_accuracy``) or per check (``min_check_rate``)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or len(value) > MAX_LABEL_BARS:
        example = "{order_id: 0.95}" if what == "field" else "{mentions_order: 0.95}"
        raise UsageError(f"{bar_name} must map at most {MAX_LABEL_BARS} {what}s to a fraction, e.g. {example}")
    out = {}
    for name, bar in value.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", name):
            raise UsageError(f"{bar_name}: {str(name)[:40]!r} is not a {what} name")
        out[name] = parse_bar(bar, f"{bar_name}[{name}]")
    return out


def pinned_bars(pinned: Pinned, min_accuracy: Decimal) -> Bars:
    """The bars a run was submitted under (older runs pinned none beyond accuracy), parsed
    once per record of its pin (``Pinned.memo``)."""
    key = ("bars", min_accuracy)
    if key not in pinned.memo:
        pinned.memo[key] = Bars.parse(min_accuracy, pinned.bars or {})
    return cast(Bars, pinned.memo[key])
