"""The statistics of a report: exact, dependency-free, checked against known values
(tests/unit/test_stats.py).

- ``wilson_interval``: the Wilson score interval of a proportion (95 % by default). Unlike
  the normal ("Wald") interval it stays inside [0, 1] and is not zero-width at 0/n or n/n.
- ``mcnemar_exact``: McNemar's test on paired answers, exact: under "no difference" each
  discordant pair (fixed or broken) is a fair coin, so the two-sided p-value is the
  binomial tail ``2 · P(X ≤ min(b, c))`` for X ~ Bin(b + c, ½), capped at 1. Exact for any
  count; the χ² approximation is wrong for the small counts a PR changes.
- ``label_metrics``: per-label precision, recall and F1 from the confusion matrix.
- ``percentile``: nearest-rank percentile of a sorted list (what "p95 latency" means here:
  the smallest value at least 95 % of calls took no longer than).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Mapping, Sequence

Z95 = 1.959963984540054     # the standard normal's 97.5th percentile
SIGNIFICANCE = 0.05


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval for ``successes`` of ``n``, or None when n is 0."""
    if n <= 0:
        return None
    p = successes / n
    denominator = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if successes == 0 else max(0.0, center - half)     # exact ends: no 0.9999999999999999
    high = 1.0 if successes == n else min(1.0, center + half)
    return low, high


def mcnemar_exact(fixed: int, broken: int) -> float:
    """Two-sided exact McNemar p-value for ``fixed`` (live wrong → candidate right) and
    ``broken`` (live right → candidate wrong) pairs; 1.0 with no discordant pair."""
    n = fixed + broken
    if n == 0:
        return 1.0
    k = min(fixed, broken)
    term, tail = 1, 1                       # C(n, 0); each next C(n, i) from the last: linear, exact
    for i in range(k):
        term = term * (n - i) // (i + 1)
        tail += term
    return float(min(Fraction(1), Fraction(2 * tail, 2 ** n)))   # exact, no float underflow


def significant(p_value: float | None, alpha: float = SIGNIFICANCE) -> bool:
    return p_value is not None and p_value < alpha


def label_metrics(confusion: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, float | int | None]]:
    """Per label (expected or answered): support, precision, recall and F1; None where the
    denominator is 0 (a label never answered has no precision)."""
    labels = sorted(set(confusion) | {a for row in confusion.values() for a in row})
    out = {}
    for label in labels:
        tp = confusion.get(label, {}).get(label, 0)
        support = sum(confusion.get(label, {}).values())
        answered = sum(row.get(label, 0) for row in confusion.values())
        precision = tp / answered if answered else None
        recall = tp / support if support else None
        f1 = (2 * precision * recall / (precision + recall)) if precision and recall else (
            0.0 if precision is not None and recall is not None else None)
        out[label] = {"support": support, "answered": answered, "precision": precision, "recall": recall, "f1": f1}
    return out


def nearest_rank(q: int, n: int) -> int:
    """The 1-based rank of the ``q``-th percentile (0–100, an integer) among ``n`` values:
    ceil(q/100 · n), at least 1, in integers (no float at the boundary)."""
    return min(n, max(1, -(-q * n // 100)))


def percentile(sorted_values: Sequence[float], q: int) -> float | None:
    """Nearest-rank percentile ``q`` of an ascending list; None when empty. (The store
    reads a run's latency percentiles at ``nearest_rank`` in the database.)"""
    if not sorted_values:
        return None
    return sorted_values[nearest_rank(q, len(sorted_values)) - 1]


def format_p(p: float) -> str:
    """A p-value as a reader takes it in: 3 significant digits, tiny ones as "< 0.0001"."""
    return "< 0.0001" if p < 1e-4 else f"{p:.3g}"
