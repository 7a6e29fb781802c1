"""The report's statistics against values known independently of this code."""

from __future__ import annotations

import math

import pytest

from gate.verdict.stats import (
    Z95,
    label_metrics,
    mcnemar_exact,
    paired_difference_interval,
    percentile,
    significant,
    wilson_interval,
    z_for,
)


def test_mcnemar_exact_one_against_nine():
    # 2 · P(X ≤ 1), X ~ Bin(10, ½) = 2 · (1 + 10) / 1024 = 22/1024 (scipy.stats.binomtest(1, 10).pvalue)
    assert mcnemar_exact(1, 9) == pytest.approx(22 / 1024, abs=1e-15)
    assert mcnemar_exact(9, 1) == mcnemar_exact(1, 9)
    assert significant(mcnemar_exact(1, 9))


def test_mcnemar_exact_edges():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0  # balanced: capped at 1
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32)  # 0.0625: not significant at 5 %
    assert not significant(mcnemar_exact(0, 5))
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)  # 0.03125: significant
    assert mcnemar_exact(4, 6) == pytest.approx(2 * 386 / 1024)  # 0.75390625
    assert 0 < mcnemar_exact(0, 2000) < 1e-300 or mcnemar_exact(0, 2000) == 0.0  # no overflow, no error


def test_wilson_intervals():
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)  # 0 %: not zero width
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(0.7225, abs=1e-4) and high == 1.0  # 100 %
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
    assert label_metrics({"a": {"b": 3}})["a"] == {
        "support": 3,
        "answered": 0,
        "precision": None,
        "recall": 0.0,
        "f1": None,
    }


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


# --- the paired difference (candidate − live on the same items) ---------------------------------

# Newcombe RG (1998), "Improved confidence intervals for the difference between binomial
# proportions based on paired data", Stat Med 17:2635–2650: the worked examples' 95 % limits
# by method 10 (the hybrid score method), in the paper's notation (e, f, g, h) = (both
# positive, first only, second only, both negative) → θ = (f − g)/n. The paper's own table
# of these examples, as transcribed (we could not reach the primary PDF; two independent
# transcriptions agree to the last digit). Rows with f = g = 0 (no discordant pair) and with
# e = h = 0 (every pair discordant) are among them.
NEWCOMBE_1998_METHOD_10 = [
    ((36, 12, 2, 0), (0.0569, 0.3404)),
    ((20, 12, 2, 16), (0.0562, 0.3292)),
    ((18, 12, 2, 18), (0.0562, 0.3290)),
    ((36, 14, 0, 0), (0.1528, 0.4167)),
    ((35, 14, 0, 1), (0.1461, 0.4175)),
    ((18, 14, 0, 18), (0.1441, 0.3963)),
    ((2, 97, 1, 0), (0.8721, 0.9854)),
    ((1, 97, 1, 1), (0.8736, 0.9850)),
    ((0, 29, 1, 0), (0.6666, 0.9882)),  # every pair discordant
    ((2, 98, 0, 0), (0.9178, 0.9945)),
    ((1, 98, 0, 1), (0.9171, 0.9916)),
    ((0, 30, 0, 0), (0.8395, 1.0)),  # every pair discordant, all one way
    ((54, 0, 0, 0), (-0.0664, 0.0664)),  # no discordant pair: not zero-width
    ((53, 0, 0, 1), (-0.0729, 0.0729)),
    ((30, 0, 0, 24), (-0.0358, 0.0358)),
    ((29, 0, 0, 25), (-0.0354, 0.0354)),
    ((28, 0, 0, 26), (-0.0352, 0.0352)),
    ((27, 0, 0, 27), (-0.0351, 0.0351)),
]


@pytest.mark.parametrize("table, limits", NEWCOMBE_1998_METHOD_10)
def test_paired_interval_reproduces_newcombe_1998_method_10(table, limits):
    e, f, g, h = table
    theta, low, high = paired_difference_interval(e, f, g, h)
    assert theta == pytest.approx((f - g) / (e + f + g + h))
    # published to 4 decimals (one row, 0.87367, is printed 0.8736): within one unit of the last
    assert low == pytest.approx(limits[0], abs=1e-4) and high == pytest.approx(limits[1], abs=1e-4)


def test_paired_interval_reproduces_fagerland_2014():
    """Fagerland MW, Lydersen S, Laake P (2014), "Recommended tests and confidence intervals
    for paired binomial proportions", Stat Med 33:2850–2875, and their book (Statistical
    Analysis of Contingency Tables, 2017, ch. 8), the Newcombe square-and-add interval:
    complete response before and after consolidation therapy (Cavo et al. 2012: 59, 6, 16,
    80) is −0.0621 (−0.1186 to −0.0046); airway hyper-responsiveness before and after stem
    cell transplantation (Bentur et al. 2009: 1, 1, 7, 12) −0.2857 (−0.5069 to −0.0256)."""
    theta, low, high = paired_difference_interval(59, 6, 16, 80)
    assert (round(theta, 4), round(low, 4), round(high, 4)) == (-0.0621, -0.1186, -0.0046)
    theta, low, high = paired_difference_interval(1, 1, 7, 12)
    assert (round(theta, 4), round(low, 4), round(high, 4)) == (-0.2857, -0.5069, -0.0256)


def test_paired_interval_edges_and_confidence():
    assert paired_difference_interval(0, 0, 0, 0) is None
    _, low, high = paired_difference_interval(0, 0, 0, 7)  # no discordant pair: ± the Wilson half of 0/7
    assert low == -high and high == pytest.approx(wilson_interval(0, 7)[1])
    _, low, high = paired_difference_interval(0, 0, 40, 0)  # every pair broken: near −1, inside [−1, 1]
    assert low == -1.0 and -1.0 < high < -0.8
    wide, narrow = paired_difference_interval(20, 12, 2, 16, 0.99), paired_difference_interval(20, 12, 2, 16, 0.9)
    assert wide[1] < 0.0562 < narrow[1] and narrow[2] < 0.3292 < wide[2]
    assert z_for(0.95) == Z95 and z_for(0.99) == pytest.approx(2.5758293, abs=1e-7)  # the normal table's 2.576
    with pytest.raises(ValueError):
        z_for(1.0)


def test_paired_lower_limit_never_falls_when_an_answer_turns_right():
    """Early stop (gate/verdict/early_stop.py) takes "every remaining item right" as the best case for
    max_drop: that needs the lower limit to rise (or stay) whenever one pair's candidate
    answer goes from wrong to right — broken → both right, or both wrong → fixed — for
    every table. Checked exhaustively up to 45 pairs."""
    lower = {}
    for n in range(1, 46):
        for e in range(n + 1):
            for f in range(n + 1 - e):
                for g in range(n + 1 - e - f):
                    lower[(e, f, g, n - e - f - g)] = paired_difference_interval(e, f, g, n - e - f - g)[1]
    for (e, f, g, h), low in lower.items():
        if g:
            assert lower[(e + 1, f, g - 1, h)] >= low - 1e-12, (e, f, g, h)
        if h:
            assert lower[(e, f + 1, g, h - 1)] >= low - 1e-12, (e, f, g, h)
