"""The floors a judge's agreement with the humans must clear before it decides a verdict
(issue 46.2, "a judge must be able to tell"), parsed from untrusted config (a mapping's
bars: the gate config's or ``dataset map --min-judge-j/--min-judge-kappa/--min-judge-items``)
and pinned with the run like every bar:

* ``min_judge_j``: Youden's J = sensitivity + specificity − 1 (default 0.5, never below 0.2).
  The Rogan–Gladen correction divides by it; a judge that says "good" to everything has
  J = 0 however many items it agrees on.
* ``min_judge_kappa``: Cohen's κ, agreement beyond chance (default 0.4, never below 0.2:
  below 0.2 is "slight" agreement on Landis & Koch's 1977 scale, not a judge).
* ``min_judge_items``: the human-labelled items the figures stand on (default 30, never
  below 20: with fewer, one item moves J by more than 0.05 on a balanced set).

Where the floors are held:

* **At the judge's own gate** (an update applying a prompt of kind judge, its runs on its
  mapped human-labelled datasets): the figures of its merged confusion matrix. The
  candidates' pass labels are not known there, so J is floored for every label the humans
  used, one against the rest (``own_figures``; for a two-label judge that is its one J), and
  a pairwise judge (labels A and B) is floored on κ and items only: its verdict is an order
  of two answers, not a pass. The floors are the strictest of its runs' mappings.
* **At a candidate's submit** (``gate.domain.judging``): the judge's pinned figures, J for
  the candidate's own pass labels (``submit_figures``), against each of the candidate's
  mappings' floors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from gate.errors import UsageError

from .judge_stats import agreement, error_rates
from .scoring import parse_bar

KEYS = ("min_judge_j", "min_judge_kappa", "min_judge_items")
DEFAULT_J, HARD_J = Decimal("0.5"), Decimal("0.2")
DEFAULT_KAPPA, HARD_KAPPA = Decimal("0.4"), Decimal("0.2")
DEFAULT_ITEMS, HARD_ITEMS = 30, 20
MAX_ITEMS = 1_000_000


@dataclass(frozen=True)
class JudgeFigures:
    """What a judge's floors are held against: its human items, κ and Youden's J (None: not
    floored, a pairwise judge's), with the sensitivity and specificity J is made of and, at
    its own gate, the label it was computed for against the rest."""

    items: int
    kappa: float | None
    youden: float | None = None
    sensitivity: float | None = None
    specificity: float | None = None
    label: str | None = None
    floors_j: bool = True  # False: a pairwise judge, floored on κ and items only

    def describe(self) -> str:
        """The figures in one phrase, for refusals: J, κ, n."""
        parts = [_j_text(self)] if self.floors_j else []
        return ", ".join(parts + [f"Cohen's κ {_fmt(self.kappa)}", f"{self.items:,} human items"])


@dataclass(frozen=True)
class JudgeFloors:
    j: Decimal = DEFAULT_J
    kappa: Decimal = DEFAULT_KAPPA
    items: int = DEFAULT_ITEMS

    @classmethod
    def parse(cls, extra: Mapping[str, Any]) -> JudgeFloors:
        return cls(
            _floor(extra.get("min_judge_j"), "min_judge_j", DEFAULT_J, HARD_J, "Youden's J"),
            _floor(extra.get("min_judge_kappa"), "min_judge_kappa", DEFAULT_KAPPA, HARD_KAPPA, "Cohen's κ"),
            _items(extra.get("min_judge_items")),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.j != DEFAULT_J:
            out["min_judge_j"] = f"{self.j:f}"
        if self.kappa != DEFAULT_KAPPA:
            out["min_judge_kappa"] = f"{self.kappa:f}"
        if self.items != DEFAULT_ITEMS:
            out["min_judge_items"] = self.items
        return out

    def describe(self) -> list[str]:
        if self == JudgeFloors():
            return []
        return [f"judge floors J ≥ {self.j.normalize():f}, κ ≥ {self.kappa.normalize():f}, {self.items} items"]

    def stricter(self, other: JudgeFloors) -> JudgeFloors:
        """The floors of both: each the higher."""
        return JudgeFloors(max(self.j, other.j), max(self.kappa, other.kappa), max(self.items, other.items))

    def miss(self, figures: JudgeFigures) -> str | None:
        """The first figure below its floor, named with its value (None: all clear)."""
        if figures.items < self.items:
            return f"{figures.items:,} human items < {self.items}"
        if figures.floors_j and (figures.youden is None or Fraction(figures.youden) < Fraction(self.j)):
            return f"{_j_text(figures)} < {self.j.normalize():f}"
        if figures.kappa is None or Fraction(figures.kappa) < Fraction(self.kappa):
            return f"Cohen's κ {_fmt(figures.kappa)} < {self.kappa.normalize():f}"
        return None


def submit_figures(agreed: Mapping[str, Any] | None, rates: Iterable[int] | None) -> JudgeFigures:
    """A judge's figures as pinned for a candidate (``PinnedJudge.agreement`` and its
    ``error_rates`` for the candidate's pass labels; None: a pairwise judge, no J)."""
    agreed = agreed or {}
    items, kappa = int(agreed.get("n") or 0), agreed.get("kappa")
    if rates is None:
        return JudgeFigures(items, kappa, floors_j=False)
    se_k, se_n, sp_k, sp_n = tuple(rates)
    return _with_j(JudgeFigures(items, kappa), se_k, se_n, sp_k, sp_n)


def own_figures(confusion: Mapping[str, Mapping[str, int]], pairwise: bool) -> JudgeFigures:
    """A judge's figures at its own gate: its merged confusion's items and κ, and unless it
    is pairwise its lowest Youden's J over the labels the humans used, each one against the
    rest (a label no human item failed against, or none passed, gives no J and is left
    out; none left: no J, which fails the floor)."""
    figures = agreement(confusion)
    base = JudgeFigures(int(figures["n"]), figures["kappa"], floors_j=not pairwise)
    if pairwise:
        return base
    answered: dict[str, int] = {}
    for row in confusion.values():
        for actual, n in row.items():
            answered[actual.casefold()] = answered.get(actual.casefold(), 0) + int(n)
    labels = sorted(figures["recall"], key=lambda label: (-answered.get(label, 0), label))  # ties: the most said
    named = len(labels) > 2  # a two-label judge has one J: no label to name
    worst: JudgeFigures | None = None
    for label in labels:
        se_k, se_n, sp_k, sp_n = error_rates(confusion, [label])
        if se_n and sp_n:
            one = _with_j(JudgeFigures(base.items, base.kappa, label=label if named else None), se_k, se_n, sp_k, sp_n)
            if worst is None or (one.youden or 0) < (worst.youden or 0):
                worst = one
    return worst or base


def merged(confusions: Iterable[Mapping[str, Mapping[str, int]]]) -> dict[str, dict[str, int]]:
    """Confusion matrices (expected × answered) added up: a judge's over its runs."""
    out: dict[str, dict[str, int]] = {}
    for confusion in confusions:
        for expected, row in confusion.items():
            into = out.setdefault(expected, {})
            for actual, n in row.items():
                into[actual] = into.get(actual, 0) + int(n)
    return out


def _with_j(base: JudgeFigures, se_k: int, se_n: int, sp_k: int, sp_n: int) -> JudgeFigures:
    if not se_n or not sp_n:
        return base
    se, sp = se_k / se_n, sp_k / sp_n
    return JudgeFigures(base.items, base.kappa, se + sp - 1, se, sp, base.label)


def _j_text(figures: JudgeFigures) -> str:
    if figures.youden is None:
        return "Youden's J n/a (its human items do not both pass and fail)"
    against = f" for {figures.label} against the rest" if figures.label else ""
    return (
        f"Youden's J {_fmt(figures.youden)}{against} (sensitivity {_fmt(figures.sensitivity)}, "
        f"specificity {_fmt(figures.specificity)})"
    )


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _floor(value: Any, name: str, default: Decimal, hard: Decimal, figure: str) -> Decimal:
    if value is None:
        return default
    floor = parse_bar(value, name)
    if floor < hard:
        raise UsageError(
            f"{name} {value!r} is below the hard minimum {hard:f}: a judge with {figure} under it cannot tell "
            f"(default {default:f})"
        )
    return floor


def _items(value: Any) -> int:
    if value is None:
        return DEFAULT_ITEMS
    text = str(value).strip()
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not re.fullmatch(r"[0-9]{1,9}", text):
        raise UsageError(f"min_judge_items {value!r} is not a whole number, e.g. {DEFAULT_ITEMS}")
    if int(text) < HARD_ITEMS:
        raise UsageError(
            f"min_judge_items {value!r} is below the hard minimum {HARD_ITEMS}: fewer human items cannot show a "
            f"judge can tell (default {DEFAULT_ITEMS})"
        )
    if int(text) > MAX_ITEMS:
        raise UsageError(f"min_judge_items {value!r} is out of range: at most {MAX_ITEMS}")
    return int(text)
