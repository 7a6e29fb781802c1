"""The statistics of a report: exact, dependency-free, checked against known values
(tests/unit/test_stats.py).

- ``wilson_interval``: the Wilson score interval of a proportion (95 % by default). Unlike
  the normal ("Wald") interval it stays inside [0, 1] and is not zero-width at 0/n or n/n.
- ``mcnemar_exact``: McNemar's test on paired answers, exact: under "no difference" each
  discordant pair (fixed or broken) is a fair coin, so the two-sided p-value is the
  binomial tail ``2 · P(X ≤ min(b, c))`` for X ~ Bin(b + c, ½), capped at 1. Exact for any
  count; the χ² approximation is wrong for the small counts a PR changes.
- ``paired_difference_interval``: the confidence interval of a difference of two paired
  proportions (candidate − live on the same items), Newcombe's hybrid score method 10
  (Newcombe 1998, "Improved confidence intervals for the difference between binomial
  proportions based on paired data", Stat Med 17:2635–2650): each marginal proportion's
  Wilson interval, squared and added with Newcombe's correction for the pairs'
  correlation. Closed form, inside [−1, 1], not zero-width with no discordant pair, and
  sensible with every pair discordant; checked against the paper's worked examples.
- ``z_for``: the two-sided normal quantile of a confidence level (0.95 → 1.95996…),
  from the standard library (``statistics.NormalDist``).
- ``label_metrics``: per-label precision, recall and F1 from the confusion matrix.
- ``percentile``: nearest-rank percentile of a sorted list (what "p95 latency" means here:
  the smallest value at least 95 % of calls took no longer than).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from statistics import NormalDist

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile
SIGNIFICANCE = 0.05


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval for ``successes`` of ``n``, or None when n is 0."""
    if n <= 0:
        return None
    p = successes / n
    denominator = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if successes == 0 else max(0.0, center - half)  # exact ends: no 0.9999999999999999
    high = 1.0 if successes == n else min(1.0, center + half)
    return low, high


def z_for(confidence: float) -> float:
    """The standard normal quantile a two-sided interval at ``confidence`` uses:
    Φ⁻¹(1 − (1 − confidence) / 2); exactly ``Z95`` at 0.95."""
    if not 0 < confidence < 1:
        raise ValueError(f"a confidence level is in (0, 1), not {confidence}")
    if confidence == 0.95:
        return Z95
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def paired_difference_interval(
    both_right: int, fixed: int, broken: int, both_wrong: int, confidence: float = 0.95
) -> tuple[float, float, float] | None:
    """(difference, low, high) of the paired difference p₁ − p₂ at ``confidence``, where
    p₁ = (both_right + fixed)/n is the candidate's accuracy and p₂ = (both_right +
    broken)/n live's, on the same n items; None when n is 0.

    Newcombe's method 10 (Stat Med 1998; 17:2635–2650), in his notation e = both right,
    f = fixed, g = broken, h = both wrong: with (l₁, u₁) and (l₂, u₂) the Wilson intervals
    of p₁ and p₂, and φ the correlation of the pairs — (eh − fg)/√((e+f)(g+h)(e+g)(f+h)),
    its numerator reduced by n/2 (not below 0) when positive, 0 when a margin is empty —

        low  = θ − √((p₁ − l₁)² − 2φ(p₁ − l₁)(u₂ − p₂) + (u₂ − p₂)²)
        high = θ + √((u₁ − p₁)² − 2φ(u₁ − p₁)(p₂ − l₂) + (p₂ − l₂)²)

    with θ = (f − g)/n. The lower limit never falls when one item's answer changes from
    wrong to right (checked for every table up to 70 items in tests/unit/test_stats.py):
    what early stop relies on (gate/verdict/early_stop.py)."""
    n = both_right + fixed + broken + both_wrong
    if n <= 0:
        return None
    z = z_for(confidence)
    e, f, g, h = both_right, fixed, broken, both_wrong
    p1, p2 = (e + f) / n, (e + g) / n
    l1, u1 = _wilson_limits(e + f, n, z)
    l2, u2 = _wilson_limits(e + g, n, z)
    margins = (e + f) * (g + h) * (e + g) * (f + h)
    numerator: float = e * h - f * g
    if numerator > 0:
        numerator = max(numerator - n / 2, 0.0)
    phi = numerator / math.sqrt(margins) if margins else 0.0
    theta = (f - g) / n
    down = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    up = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return theta, max(-1.0, theta - down), min(1.0, theta + up)


def _wilson_limits(successes: int, n: int, z: float) -> tuple[float, float]:
    found = wilson_interval(successes, n, z)
    assert found is not None  # n > 0
    return found


def mcnemar_exact(fixed: int, broken: int) -> float:
    """Two-sided exact McNemar p-value for ``fixed`` (live wrong → candidate right) and
    ``broken`` (live right → candidate wrong) pairs; 1.0 with no discordant pair."""
    n = fixed + broken
    if n == 0:
        return 1.0
    k = min(fixed, broken)
    term, tail = 1, 1  # C(n, 0); each next C(n, i) from the last: linear, exact
    for i in range(k):
        term = term * (n - i) // (i + 1)
        tail += term
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))  # exact, no float underflow


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
        f1 = (
            (2 * precision * recall / (precision + recall))
            if precision and recall
            else (0.0 if precision is not None and recall is not None else None)
        )
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
