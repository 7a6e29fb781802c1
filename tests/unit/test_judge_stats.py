"""The statistics of judged runs against published worked values (gate/verdict/judge_stats.py).

* The corrected pass rate's interval: the four worked examples of Lang & Reiczigel (2014,
  Prev Vet Med 113:13–22), as the paper reports them (quoted by the CRAN package asht,
  whose author checked them against the paper: man/prevSeSp.Rd).
* The Rogan–Gladen point estimate: epiR's epi.prev worked example (150 cows, 23
  positive, Se 0.96, Sp 0.89: "5.1 cases per 100"), RSurveillance's tp example output
  (20 of 120, Se 0.9, Sp 0.99: 0.17603) and Bendavid et al. (2021, Int J Epidemiol
  50:410–419: 50 of 3,330 positive, sensitivity 82.8 %, specificity 99.5 %: 1.2 %).
* Cohen's κ: the worked examples of the Wikipedia article "Cohen's kappa" (50 items, 20 /
  5 / 10 / 15: κ = 0.4; the pair with the same agreement and κ 0.1304 and 0.2593).
* Fisher's exact test: the lady tasting tea (Fisher 1935), 3 of 4 cups right: one-sided
  p = 17/70.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from gate.verdict.judge_stats import (
    agreement,
    cohen_kappa,
    corrected,
    drift,
    error_rates,
    fisher_lower,
    lang_reiczigel,
    rogan_gladen,
    uncorrectable,
)

# (apparent, n, Se, nSe, Sp, nSp) -> the 95 % interval Lang & Reiczigel (2014) report, to their digits
LANG_REICZIGEL_EXAMPLES = [
    ((4060 / 11284, 11284, 178 / 179, 179, 358 / 359, 359), (0.349, 0.372), 3),  # example 1
    ((51 / 2971, 2971, 32 / 33, 33, 20 / 20, 20), (0.0, 0.053), 3),  # example 2
    ((0.06, 11862, 0.80, 10, 1.0, 12), (0.0, 0.147), 3),  # example 3
    ((259 / 509, 509, 84 / 127, 127, 96 / 109, 109), (0.58, 0.87), 2),  # example 4
    ((51 / 509, 509, 23 / 41, 41, 187 / 195, 195), (0.037, 0.195), 3),  # example 4, second test
]


@pytest.mark.parametrize(("args", "published", "digits"), LANG_REICZIGEL_EXAMPLES)
def test_the_interval_matches_lang_and_reiczigels_worked_examples(args, published, digits):
    low, high = lang_reiczigel(*args)
    assert (round(low, digits), round(high, digits)) == published


def test_the_corrected_rate_matches_published_rogan_gladen_estimates():
    # epiR, epi.prev: 23 of 150 positive, Se 0.96, Sp 0.89 -> 5.1 per 100
    assert round(float(rogan_gladen(Fraction(23, 150), Fraction(96, 100), Fraction(89, 100))) * 100, 1) == 5.1
    # RSurveillance, tp(20, 120, 0.9, 0.99): true prevalence 0.17603
    assert round(float(rogan_gladen(Fraction(20, 120), Fraction(9, 10), Fraction(99, 100))), 5) == 0.17603
    # Bendavid et al. 2021: 50 of 3,330, sensitivity 82.8 %, specificity 99.5 % -> 1.2 %
    estimate = rogan_gladen(Fraction(50, 3330), Fraction(828, 1000), Fraction(995, 1000))
    assert round(float(estimate) * 100, 1) == 1.2


def test_a_judge_whose_errors_carry_no_information_gives_no_corrected_rate():
    assert rogan_gladen(Fraction(1, 2), Fraction(1, 2), Fraction(1, 2)) is None
    assert corrected(5, 10, (1, 2, 1, 2)) is None
    assert corrected(5, 10, (0, 0, 5, 5)) is None  # no human-passed item: no sensitivity


def test_a_run_pinned_with_a_judge_that_cannot_tell_names_its_youden_j():
    """A judge that says good to everything can no longer be pinned (its floors refuse it at
    its own gate and at submit: tests/integration/test_judge_floors.py); a run pinned with one
    before the floors still says why it has no corrected rate, naming the figure."""
    assert uncorrectable(30, 30, (100, 100, 0, 100)) == (
        "the judge cannot tell: Youden's J = sensitivity + specificity − 1 = 0.00 "
        "(sensitivity 1.00, specificity 0.00), the correction divides by it"
    )
    assert uncorrectable(30, 30, (93, 100, 93, 100)) is None


def test_corrected_figures_from_counts_follow_the_published_example():
    # Lang & Reiczigel example 4 in counts: 259 of 509, Se 84/127, Sp 96/109
    found = corrected(259, 509, (84, 127, 96, 109))
    assert (round(found["interval"][0], 2), round(found["interval"][1], 2)) == (0.58, 0.87)
    assert Fraction(*found["exact"]) == rogan_gladen(Fraction(259, 509), Fraction(84, 127), Fraction(96, 109))


def test_cohens_kappa_matches_the_published_examples():
    assert cohen_kappa({"yes": {"yes": 20, "no": 5}, "no": {"yes": 10, "no": 15}}) == pytest.approx(0.4)
    assert round(cohen_kappa({"yes": {"yes": 45, "no": 15}, "no": {"yes": 25, "no": 15}}), 4) == 0.1304
    assert round(cohen_kappa({"yes": {"yes": 25, "no": 35}, "no": {"yes": 5, "no": 35}}), 4) == 0.2593
    assert cohen_kappa({}) is None
    assert cohen_kappa({"yes": {"yes": 3}}) is None  # one label: chance agreement is total


def test_agreement_and_error_rates_of_a_judge():
    confusion = {"good": {"good": 90, "bad": 10}, "Bad": {"bad": 85, "good": 15}}
    figures = agreement(confusion)
    assert (figures["n"], figures["agreed"]) == (200, 175) and figures["accuracy"] == 0.875
    assert figures["recall"] == {"bad": 0.85, "good": 0.9}
    assert error_rates(confusion, ["good"]) == (90, 100, 85, 100)
    assert error_rates({"good": {"(invalid)": 4, "good": 6}}, ["GOOD"]) == (6, 10, 0, 0)


def test_fishers_exact_test_matches_the_lady_tasting_tea():
    assert fisher_lower(1, 4, 3, 4) == Fraction(17, 70)
    assert fisher_lower(0, 0, 93, 100) == 1


def test_sentinels_drift_below_their_pinned_agreement():
    agreed = [True] * 11 + [False] * 9
    found = drift(agreed, 20, 186, 200)  # "agreed on 11 of 20 sentinels, pinned 93 %"
    assert found["drifted"] and found["settled"] and found["p_value"] < 1e-4
    assert (found["agreed"], found["judged"], found["planned"]) == (11, 20, 20)
    assert not drift([True] * 18 + [False] * 2, 20, 186, 200)["drifted"]
    assert not drift([True] * 19 + [False], 20, 200, 200)["drifted"]  # one miss against a perfect evaluation
    early = drift([False] * 6 + [True] * 2, 20, 186, 200)  # 6 of 8 missed: whatever the 12 to come say
    assert early["settled"] and early["drifted"]
    assert not drift([True, False] * 4, 20, 186, 200)["settled"]  # one miss in two: not yet


def test_a_late_drift_is_caught_where_the_whole_run_is_not():
    """The issue's case: agreeing as pinned, then flipping over the last quarter. The whole
    run's Fisher test sees 32 of 40 (p = 0.016, not below 1 %); the drift test alarms."""
    late = [True] * 30 + [True, True] + [False] * 8
    found = drift(late, 40, 186, 200)
    assert found["p_value"] > 0.01 and found["drifted"] and found["cusum"] >= found["threshold"]
    spread = [n % 5 != 0 for n in range(40)]  # the same 8 misses spread evenly: no drift
    assert not drift(spread, 40, 186, 200)["drifted"]
