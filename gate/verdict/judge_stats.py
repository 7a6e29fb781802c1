"""The statistics of a judged run: how far a judge agrees with the humans who labelled its
dataset, what a pass rate measured by a judge becomes once the judge's own error rates are
taken out, and whether a judge still agrees during a run. Exact, dependency-free, checked
against published worked values in tests/unit/test_judge_stats.py.

- ``agreement``: a judge's evaluation (its confusion matrix, expected × answered, from the
  runs that made it live): items, accuracy, recall per label, and Cohen's κ (Cohen 1960,
  "A coefficient of agreement for nominal scales", Educ Psychol Meas 20:37–46): observed
  agreement corrected for the agreement the two raters' label frequencies give by chance.
- ``error_rates``: a graded judge's sensitivity and specificity for one candidate's pass
  labels, as counts: of the items the humans passed, how many the judge passed; of those
  they failed, how many it failed (an invalid judge answer is not a pass).
- ``rogan_gladen``: the pass rate corrected for those error rates (Rogan & Gladen 1978,
  "Estimating prevalence from the results of a screening test", Am J Epidemiol 107:71–76):
  (p + Sp − 1)/(Se + Sp − 1), exact, clipped to [0, 1].
- ``lang_reiczigel``: its confidence interval, carrying the uncertainty of both samples (the
  candidate's items and the judge's human-labelled items) — Lang & Reiczigel 2014,
  "Confidence limits for prevalence of disease adjusted for estimated sensitivity and
  specificity", Prev Vet Med 113:13–22: an Agresti–Coull-style adjustment (z²/2 passes
  and z²/2 fails added to the run, one of each to the sensitivity and specificity samples),
  the Rogan–Gladen variance of the adjusted figures (with the paper's equation 4 as
  corrected: (1 − P)², not (1 + P)²), and the paper's shift term. Checked against the
  paper's four worked examples.
- ``fisher_lower``: the one-sided Fisher exact test (Fisher 1935, "The logic of inductive
  inference", JRSS 98:39–82) that sentinels answered by a judge during a run agree less
  often than its pinned evaluation did: the probability, given the total agreements of the
  two samples, that the sentinels hold that few of them (hypergeometric lower tail). It
  needs no assumption that the evaluation's share is the true one (a judge that agreed on
  every item of its evaluation is not condemned by one miss among 20 sentinels).
- ``drift``: the sentinels' verdict: drifted when the CUSUM over the sentinels in the
  order the judge answered them reaches its threshold (``gate.verdict.sentinel_drift``: a
  late drift is not diluted by the agreement before it; false alarms ≤ 1 % per run), with
  the Fisher p-value of the whole run beside it, and what the run's sentinels could catch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

from .sentinel_drift import DRIFT_TEST
from .sentinel_drift import drift as cusum_drift
from .stats import z_for


def _folded(confusion: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for expected, row in confusion.items():
        folded = out.setdefault(expected.casefold(), {})
        for actual, n in row.items():
            folded[actual.casefold()] = folded.get(actual.casefold(), 0) + int(n)
    return out


def cohen_kappa(confusion: Mapping[str, Mapping[str, int]]) -> float | None:
    """Cohen's κ of a confusion matrix (rows: the humans' labels, columns: the judge's);
    None with no item, or when chance agreement is already total (one label only)."""
    table = _folded(confusion)
    n = sum(sum(row.values()) for row in table.values())
    if n == 0:
        return None
    labels = set(table) | {a for row in table.values() for a in row}
    observed = Fraction(sum(table.get(label, {}).get(label, 0) for label in labels), n)
    chance = sum(
        Fraction(sum(table.get(label, {}).values()), n) * Fraction(sum(row.get(label, 0) for row in table.values()), n)
        for label in labels
    )
    if chance == 1:
        return None
    return float((observed - chance) / (1 - chance))


def agreement(confusion: Mapping[str, Mapping[str, int]]) -> dict:
    """A judge's agreement with the humans: items, agreed, accuracy, recall per (human)
    label, κ. Labels compare case-insensitively, as answers do."""
    table = _folded(confusion)
    n = sum(sum(row.values()) for row in table.values())
    agreed = sum(row.get(label, 0) for label, row in table.items())
    recall = {
        label: (row.get(label, 0) / sum(row.values())) for label, row in sorted(table.items()) if sum(row.values())
    }
    return {
        "n": n,
        "agreed": agreed,
        "accuracy": agreed / n if n else None,
        "recall": recall,
        "kappa": cohen_kappa(confusion),
    }


def error_rates(confusion: Mapping[str, Mapping[str, int]], passing: Iterable[str]) -> tuple[int, int, int, int]:
    """(judge passed, humans passed, judge failed, humans failed) over the judge's
    evaluation, for the pass labels ``passing``: sensitivity = first/second, specificity =
    third/fourth."""
    wanted = {p.casefold() for p in passing}
    se_k = se_n = sp_k = sp_n = 0
    for expected, row in _folded(confusion).items():
        for actual, n in row.items():
            if expected in wanted:
                se_n += n
                se_k += n if actual in wanted else 0
            else:
                sp_n += n
                sp_k += n if actual not in wanted else 0
    return se_k, se_n, sp_k, sp_n


def rogan_gladen(apparent: Fraction, sensitivity: Fraction, specificity: Fraction) -> Fraction | None:
    """The corrected share (p + Sp − 1)/(Se + Sp − 1), clipped to [0, 1]; None when
    Se + Sp ≤ 1 (the judge's verdicts carry no information about the answers)."""
    youden = sensitivity + specificity - 1
    if youden <= 0:
        return None
    return min(Fraction(1), max(Fraction(0), (apparent + specificity - 1) / youden))


def lang_reiczigel(
    apparent: float,
    n: float,
    sensitivity: float,
    n_se: float,
    specificity: float,
    n_sp: float,
    confidence: float = 0.95,
) -> tuple[float, float] | None:
    """Lang & Reiczigel's (2014) interval of the corrected share (see the module
    docstring); None when a sample is empty or the adjusted Se + Sp ≤ 1."""
    if n <= 0 or n_se <= 0 or n_sp <= 0:
        return None
    z = z_for(confidence)
    n_ = n + z * z
    ap = (n * apparent + z * z / 2) / n_
    se_n, sp_n = n_se + 2, n_sp + 2
    se = (n_se * sensitivity + 1) / se_n
    sp = (n_sp * specificity + 1) / sp_n
    youden = se + sp - 1
    if youden <= 0:
        return None
    p = (ap + sp - 1) / youden
    shift = 2 * z * z * (p * se * (1 - se) / se_n - (1 - p) * sp * (1 - sp) / sp_n)
    variance = (ap * (1 - ap) / n_ + p * p * se * (1 - se) / se_n + (1 - p) ** 2 * sp * (1 - sp) / sp_n) / youden**2
    half = z * math.sqrt(max(0.0, variance))
    return max(0.0, p + shift - half), min(1.0, p + shift + half)


def corrected(passed: int, scored: int, rates: tuple[int, int, int, int], confidence: float = 0.95) -> dict | None:
    """A judged pass rate corrected for the judge's error rates, with its interval: the
    estimate (exact, as a float and as the fraction bars compare), low, high; None when
    there is nothing to correct with."""
    se_k, se_n, sp_k, sp_n = rates
    if not scored or not se_n or not sp_n:
        return None
    estimate = rogan_gladen(Fraction(passed, scored), Fraction(se_k, se_n), Fraction(sp_k, sp_n))
    interval = lang_reiczigel(passed / scored, scored, se_k / se_n, se_n, sp_k / sp_n, sp_n, confidence)
    if estimate is None or interval is None:
        return None
    return {
        "estimate": float(estimate),
        "exact": [estimate.numerator, estimate.denominator],
        "interval": list(interval),
    }


def uncorrectable(passed: int, scored: int, rates: tuple[int, int, int, int], confidence: float = 0.95) -> str | None:
    """Why ``corrected`` gives no rate, naming the figure that failed (issue 46.2); None when
    it gives one. A judge that says good to everything (sensitivity 1, specificity 0) cannot
    tell: its Youden's J is 0 and the correction divides by it."""
    se_k, se_n, sp_k, sp_n = rates
    if not se_n or not sp_n:
        missing = " and ".join(
            name
            for name, n in (("sensitivity (no item the humans passed)", se_n), ("specificity (none they failed)", sp_n))
            if not n
        )
        return f"the judge's human-labelled items give no {missing}"
    if not scored:
        return "no item was scored"
    se, sp = Fraction(se_k, se_n), Fraction(sp_k, sp_n)
    youden = se + sp - 1
    if youden <= 0:
        return (
            f"the judge cannot tell: Youden's J = sensitivity + specificity − 1 = {float(youden):.2f} "
            f"(sensitivity {float(se):.2f}, specificity {float(sp):.2f}), the correction divides by it"
        )
    if corrected(passed, scored, rates, confidence) is None:
        return (
            f"the judge cannot tell: Youden's J = {float(youden):.2f} of {se_n:,} + {sp_n:,} human items is ≤ 0 once "
            "adjusted for their number (Lang–Reiczigel), the correction divides by it"
        )
    return None


def fisher_lower(agreed: int, n: int, pinned_agreed: int, pinned_n: int) -> Fraction:
    """One-sided Fisher exact p-value (exact) that ``agreed`` of ``n`` sentinels agree less
    often than ``pinned_agreed`` of ``pinned_n`` evaluation items did: P(X ≤ agreed) for X
    the agreements among ``n`` drawn from the two samples' pooled items."""
    total, good = n + pinned_n, agreed + pinned_agreed
    if n == 0:
        return Fraction(1)
    low = max(0, n - (total - good))
    tail = sum(math.comb(good, x) * math.comb(total - good, n - x) for x in range(low, agreed + 1))
    return Fraction(tail, math.comb(total, n))


def drift(outcomes: Sequence[bool], planned: int, pinned_agreed: int, pinned_n: int) -> dict:
    """The sentinels so far, in the order the judge answered them (True: it agreed with the
    humans), against the pinned agreement: drifted and settled (the CUSUM reached its
    threshold: final), the whole run's Fisher p-value (shown, not the test), and the power
    the run's sentinels have (``gate.verdict.sentinel_drift``)."""
    agreed, judged = sum(outcomes), len(outcomes)
    found = cusum_drift(outcomes, planned, pinned_agreed, pinned_n)
    return {
        "agreed": agreed,
        "judged": judged,
        "planned": planned,
        "p_value": float(fisher_lower(agreed, judged, pinned_agreed, pinned_n)),
        **found,
        "test": DRIFT_TEST,
    }
