"""The sentinels' drift test (gate/verdict/sentinel_drift.py): its parts against published
or closed-form values and against an enumeration of every outcome, and, by a seeded
simulation, that an honest judge alarms at most 1 % of runs and that the stated power holds.

* A binomial tail: P(X ≥ 8) for X ~ Binomial(10, ½) = 56/1024 (any textbook).
* Clopper–Pearson: 5 of 10 has the 95 % two-sided interval [0.1871, 0.8129] (Clopper &
  Pearson 1934; the interval tabled in e.g. Brown, Cai & DasGupta 2001, Stat Sci 16:101);
  n of n has the closed-form one-sided lower bound α^(1/n).
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from gate.verdict.judge_bars import DEFAULT_SENTINELS
from gate.verdict.sentinel_drift import (
    FALSE_ALARM,
    alarm_probability,
    binomial_upper,
    clopper_pearson_lower,
    design,
    drift,
)


def test_a_binomial_tail_and_clopper_pearson_have_their_published_values():
    assert binomial_upper(8, 10, 0.5) == pytest.approx(56 / 1024, abs=1e-15)
    assert clopper_pearson_lower(5, 10, 0.025) == pytest.approx(0.1871, abs=1e-4)
    assert clopper_pearson_lower(200, 200, 0.005) == pytest.approx(0.005 ** (1 / 200), abs=1e-9)
    assert clopper_pearson_lower(0, 200) == 0.0


def test_a_judge_evaluated_on_thousands_of_human_items_is_watched_too():
    """A sum of ``math.comb`` terms overflowed a float past ~1,100–2,800 items (the hostile
    review: a judged run then never finished); the tail is the incomplete beta function."""
    assert clopper_pearson_lower(100_000, 100_000, 0.005) == pytest.approx(0.005 ** (1 / 100_000), abs=1e-12)
    lower = clopper_pearson_lower(1200, 1500)
    assert binomial_upper(1200, 1500, lower) == pytest.approx(0.005, rel=1e-6)  # its definition
    assert 0.75 < lower < 0.8
    said = drift([True] * 30 + [False] * 10, 40, 2800, 3000)
    assert said["drifted"] and said["threshold"] > 0


def _enumerated(n: int, p: float, w: int, h: int, switch: int | None = None, q: float = 0.0) -> float:
    """The alarm probability by summing over every one of the 2ⁿ outcome sequences."""
    total = 0.0
    for seq in itertools.product((True, False), repeat=n):
        s, alarmed, prob = 0, False, 1.0
        for t, agreed in enumerate(seq):
            share = q if switch is not None and t >= switch else p
            prob *= share if agreed else 1 - share
            s = max(0, s + (-1 if agreed else w))
            alarmed = alarmed or s >= h
        total += prob if alarmed else 0.0
    return total


@pytest.mark.parametrize(("w", "h"), [(1, 3), (2, 5), (3, 7)])
def test_the_alarm_probability_is_exact(w, h):
    assert alarm_probability([(12, 0.8)], w, h) == pytest.approx(_enumerated(12, 0.8, w, h), abs=1e-12)
    two = alarm_probability([(9, 0.9), (3, 0.2)], w, h)
    assert two == pytest.approx(_enumerated(12, 0.9, w, h, switch=9, q=0.2), abs=1e-12)


def test_the_default_budget_catches_a_judge_that_flips_over_the_last_quarter():
    """A judge pinned at 93 % of 200 that flips (7 % agreement) over the last quarter: the
    default 40 sentinels catch it almost surely; 20 would not with 90 % (why 40)."""
    test = design(DEFAULT_SENTINELS, 186, 200)
    assert test.power(0.07) > 0.99 and test.false_alarm() <= FALSE_ALARM <= 0.01
    assert 0.07 < test.smallest_drift() < 0.93
    assert design(20, 186, 200).power(0.07) < 0.9
    assert design(10, 186, 200).smallest_drift() is None  # the 10 sentinels: nothing at 90 %


def _alarms(
    rng: random.Random, runs: int, planned: int, pinned: tuple[int, int] | None, p: float, late: float
) -> float:
    """The share of simulated runs that alarm: the pinned evaluation drawn (``pinned`` None:
    200 items at the judge's true ``p``), then ``planned`` sentinels at ``p`` and at ``late``
    over the last quarter."""
    alarmed = 0
    last = math.ceil(planned / 4)
    for _ in range(runs):
        agreed, n = pinned or (sum(rng.random() < p for _ in range(200)), 200)
        outcomes = [rng.random() < (p if t < planned - last else late) for t in range(planned)]
        alarmed += drift(outcomes, planned, agreed, n)["drifted"]
    return alarmed / runs


def test_an_honest_judge_alarms_at_most_one_run_in_a_hundred_and_the_stated_power_holds():
    rng = random.Random(46)
    for p in (0.93, 0.8):  # honest: the same agreement during the run as when evaluated
        assert _alarms(rng, 2000, DEFAULT_SENTINELS, None, p, p) <= 0.01
    stated = design(DEFAULT_SENTINELS, 186, 200).smallest_drift()
    caught = _alarms(rng, 3000, DEFAULT_SENTINELS, (186, 200), 0.93, stated)
    assert caught == pytest.approx(0.9, abs=0.02)  # 3σ of 3,000 runs: 0.016
