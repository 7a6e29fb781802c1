"""The report's statistics against values known independently of this code."""

from __future__ import annotations

import math

import pytest

from gate.stats import label_metrics, mcnemar_exact, percentile, significant, wilson_interval


def test_mcnemar_exact_one_against_nine():
    # 2 · P(X ≤ 1), X ~ Bin(10, ½) = 2 · (1 + 10) / 1024 = 22/1024 (scipy.stats.binomtest(1, 10).pvalue)
    assert mcnemar_exact(1, 9) == pytest.approx(22 / 1024, abs=1e-15)
    assert mcnemar_exact(9, 1) == mcnemar_exact(1, 9)
    assert significant(mcnemar_exact(1, 9))


def test_mcnemar_exact_edges():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0                               # balanced: capped at 1
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32)             # 0.0625: not significant at 5 %
    assert not significant(mcnemar_exact(0, 5))
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)             # 0.03125: significant
    assert mcnemar_exact(4, 6) == pytest.approx(2 * 386 / 1024)     # 0.75390625
    assert 0 < mcnemar_exact(0, 2000) < 1e-300 or mcnemar_exact(0, 2000) == 0.0   # no overflow, no error


def test_wilson_intervals():
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)   # 0 %: not zero width
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(0.7225, abs=1e-4) and high == 1.0   # 100 %
    low, high = wilson_interval(7, 16)
    # statsmodels.stats.proportion.proportion_confint(7, 16, method='wilson') = (0.2310, 0.6682)
    assert low == pytest.approx(0.2310, abs=1e-4) and high == pytest.approx(0.6682, abs=1e-4)
    assert wilson_interval(0, 0) is None


def test_label_metrics_from_a_confusion_matrix():
    confusion = {"yes": {"yes": 8, "no": 2}, "no": {"no": 5, "yes": 1, "(invalid)": 1}}
    m = label_metrics(confusion)
    assert m["yes"]["precision"] == pytest.approx(8 / 9) and m["yes"]["recall"] == pytest.approx(8 / 10)
    assert m["yes"]["f1"] == pytest.approx(2 * (8 / 9) * 0.8 / (8 / 9 + 0.8))
    assert m["no"]["precision"] == pytest.approx(5 / 7) and m["no"]["recall"] == pytest.approx(5 / 7)
    assert m["(invalid)"]["recall"] is None and m["(invalid)"]["precision"] == 0.0
    assert label_metrics({"a": {"b": 3}})["a"] == {"support": 3, "answered": 0, "precision": None, "recall": 0.0,
                                                   "f1": None}


def test_nearest_rank_percentiles():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50 and percentile(values, 95) == 95 and percentile(values, 100) == 100
    assert percentile([7], 95) == 7 and percentile([], 50) is None
    assert percentile([1, 2, 3, 4], 50) == 2 and percentile([1, 2, 3, 4], 51) == 3
    assert not math.isnan(percentile([0.5, 1.5], 0))


def test_mcnemar_is_linear_in_the_discordant_pairs():
    """A pull request sets the counts: 20,000 discordant pairs must not take seconds (the
    sum of binomial coefficients from scratch took 32 s)."""
    import time
    started = time.perf_counter()
    assert mcnemar_exact(10_000, 10_000) == 1.0 and mcnemar_exact(2_500, 47_500) == 0.0
    assert time.perf_counter() - started < 1.0
