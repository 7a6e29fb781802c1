"""The rollout's sequential test (gate/rollout/sequence.py, gate/rollout/rule.py): its
mixture against the values published with the method's reference implementation, and the
error it bounds, a wrong promotion, in a simulation of 2,000 rollouts at the boundary
looked at after every outcome (vectorised: ``support.sequence_numpy``, checked here
against the gate's own code)."""

from __future__ import annotations

import math
import random
import time

import numpy as np
import pytest
from support import sequence_numpy as vec

from gate.errors import UsageError
from gate.rollout.rule import RolloutConfig, decide, tuning
from gate.rollout.sequence import (
    Arm,
    best_rho,
    beta_binomial_log_mixture,
    difference_evidence,
    difference_interval,
    log_evidence,
    prior_size,
    rate_interval,
)
from gate.states import RolloutStatus


def test_the_mixture_matches_the_published_reference_values():
    """Howard, Ramdas, McAuliffe & Sekhon (2021) publish a reference implementation,
    confseq, whose unit tests (test/uniform_boundaries_unittest.cpp, "all target values are
    from a reference implementation in R"; V_OPT = 100, ALPHA_OPT = ALPHA = 0.05) give:
    best_rho = 12.60056 (TestTwoSidedNormalMixture); for the two-sided beta-binomial
    mixture with g = 0.2, h = 0.8 the log mixture at s = 10, v = 100 = -0.6941012 and its
    bound at v = 100 = 31.4308 (TestTwoSidedBetaBinomialMixture); and
    bernoulli_confidence_interval(700, 1000, 0.05, t_opt 100) = [0.651629, 0.745949],
    (15, 50, t_opt 50) = [0.129556, 0.511896], (5, 50, 50) = [0.013021, 0.269264],
    (1, 50, 50) = [0, 0.13489], (100, 200, 1) = [0.328923, 0.671076] and [0, 1] for 1 of 2
    (BernoulliConfidenceIntervalTest)."""
    assert best_rho(100, 0.05) == pytest.approx(12.60056, abs=1e-5)
    assert beta_binomial_log_mixture(10, 100, 100, 0.2, 0.8, 0.05) == pytest.approx(-0.6941012, abs=1e-5)
    low, high = 0.0, 100 / 0.2  # the bound: where the log mixture crosses log(1/alpha)
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (
            (middle, high)
            if beta_binomial_log_mixture(middle, 100, 100, 0.2, 0.8, 0.05) < math.log(20)
            else (low, middle)
        )
    assert low == pytest.approx(31.4308, abs=1e-4)
    for (correct, n, t_opt), published in [
        ((700, 1000, 100), (0.651629, 0.745949)),
        ((15, 50, 50), (0.129556, 0.511896)),
        ((5, 50, 50), (0.013021, 0.269264)),
        ((1, 50, 50), (0.0, 0.13489)),
        ((100, 200, 1), (0.328923, 0.671076)),
        ((1, 2, 50), (0.0, 1.0)),
    ]:
        assert rate_interval(Arm(n, correct), 0.05, t_opt) == pytest.approx(published, abs=1e-5)


def test_the_evidence_is_the_mixture_in_its_bernoulli_form():
    """log_evidence(arm, p) is beta_binomial_log_mixture with g = p, h = 1 - p, s = k - np,
    v = np(1 - p), v_opt = p(1 - p) t_opt; it is at most 0 at the observed rate."""
    rng = random.Random(46)
    for _ in range(200):
        n = rng.randint(1, 50_000)
        k, p, t_opt = rng.randint(0, n), rng.uniform(0.001, 0.999), rng.choice([1, 50, 400, 36_000, 9e7])
        v = p * (1 - p)
        general = beta_binomial_log_mixture(k - n * p, n * v, v * t_opt, p, 1 - p, 0.05)
        assert log_evidence(Arm(n, k), p, prior_size(t_opt, 0.05)) == pytest.approx(general, abs=1e-7)
        if 0 < k < n:
            assert log_evidence(Arm(n, k), k / n, prior_size(t_opt, 0.05)) <= 1e-9


def test_the_evidence_is_convex_so_the_searches_find_the_minimum_and_the_edges():
    """The golden-section search over the stable rate and the regula falsi for the
    interval's ends rely on convexity: of log M(p) in p, hence of log E(d) in d."""
    rng = random.Random(7)
    grid = [i / 200 for i in range(1, 200)]
    for _ in range(150):
        n = rng.choice([1, 7, 100, 1000, 40_000])
        arm, c = Arm(n, rng.randint(0, n)), prior_size(rng.choice([1, 100, 400, 36_000, 9e7]), 0.05)
        values = [log_evidence(arm, p, c) for p in grid]
        # (to within rounding: with a prior of 10^7 outcomes the log-gammas cancel to ~1e-7)
        assert all(a - 2 * b + c_ >= -1e-6 * max(1.0, abs(b)) for a, b, c_ in zip(values, values[1:], values[2:]))
    canary, stable = Arm(900, 790), Arm(8100, 7300)
    ds = [-0.2 + i / 200 for i in range(81)]
    evidence = [difference_evidence(canary, stable, d, prior_size(400, 0.05), prior_size(36_000, 0.05)) for d in ds]
    assert all(a - 2 * b + c_ >= -1e-6 for a, b, c_ in zip(evidence, evidence[1:], evidence[2:]))


def test_the_vectorised_copy_agrees_with_the_gate():
    """The simulations below run support.sequence_numpy; on random tallies, many near the
    boundary, it gives the gate's evidence and the gate's decisions."""
    config = RolloutConfig(canary_percent=10, min_feedback=100, max_drop=0.05, confidence=0.95, max_hours=48)
    t_canary, t_stable = tuning(config)
    rng = random.Random(10)
    tallies = []
    for _ in range(60):
        nc = rng.randint(100, 3000)
        ns = rng.randint(100, 30_000)
        ps = rng.uniform(0.6, 0.98)
        pc = min(0.999, max(0.0, ps - 0.05 + rng.gauss(0, 2.5 / math.sqrt(nc))))
        tallies.append((nc, round(nc * pc), ns, round(ns * ps)))
    nc, kc, ns, ks = (np.array(column, dtype=float) for column in zip(*tallies))
    copied = vec.difference_evidence(nc, kc, ns, ks, -0.05, prior_size(t_canary, 0.05), prior_size(t_stable, 0.05))
    said = vec.decisions(nc, kc, ns, ks, 0.05, 0.05, t_canary, t_stable)
    kinds = {RolloutStatus.PROMOTED: 1, RolloutStatus.ROLLED_BACK: -1, RolloutStatus.CANARY: 0}
    for i, (a, b, c, d) in enumerate(tallies):
        canary, stable = Arm(a, b), Arm(c, d)
        own = difference_evidence(canary, stable, -0.05, prior_size(t_canary, 0.05), prior_size(t_stable, 0.05))
        assert copied[i] == pytest.approx(own, abs=1e-6)
        assert said[i] == kinds[decide(config, canary, stable, hours=0).status], tallies[i]
    assert {-1, 0, 1} <= set(said.tolist())  # the sample has every kind of decision


# The boundary: the canary truly max_drop worse (85 % against 90 %), 10 % of the traffic,
# 150 outcomes an hour in all for 48 hours (7,200: the canary's 15 an hour, a few hundred a
# day), decided from min_feedback 100. The worker looks every 2 s; at this rate a look sees
# at most one new outcome (two in 2 s: 0.3 % of looks), so the simulation applies the rule
# after every outcome: every look the worker could take, and more.
BOUNDARY = RolloutConfig(canary_percent=10, min_feedback=100, max_drop=0.05, confidence=0.95, max_hours=48)
OUTCOMES = 7200


def boundary_rollouts(decide_tallies) -> tuple[float, float]:
    first, _ = vec.simulate(decide_tallies, 0.85, 0.90, 2000, OUTCOMES, 0.10, BOUNDARY.min_feedback, seed=20261207)
    return float(np.mean(first == 1)), float(np.mean(first == -1))


def test_wrong_promotions_at_the_boundary_stay_within_alpha():
    """2,000 rollouts at the boundary (above), the rule applied after each of 7,200
    outcomes: measured 12 promoted and 6 rolled back of 2,000 (0.006 and 0.003; ~3 s),
    bound 1 - confidence = 0.05 (+ 0.01 for the simulation's own noise). A fixed-sample
    (Wald) interval looked at as often promotes 393 of them (0.197): the check can fail."""
    alpha = 1 - BOUNDARY.confidence
    t_canary, t_stable = tuning(BOUNDARY)
    started = time.perf_counter()
    promoted, rolled_back = boundary_rollouts(
        lambda *t: vec.decisions(*t, BOUNDARY.max_drop, alpha, t_canary, t_stable, stable_guess=0.90)
    )
    assert promoted <= alpha + 0.01, promoted
    assert promoted + rolled_back <= alpha + 0.01, (promoted, rolled_back)
    naive, _ = boundary_rollouts(lambda *t: vec.wald_decisions(*t, BOUNDARY.max_drop, alpha))
    assert naive > alpha + 0.01, naive  # peeking breaks a fixed-sample interval
    assert time.perf_counter() - started < 60  # ~4 s on a quiet machine: vectorised


def test_a_clearly_better_or_worse_canary_is_decided():
    config = RolloutConfig(canary_percent=10, min_feedback=200, max_drop=0.05, confidence=0.95, max_hours=48)
    t_canary, t_stable = tuning(config)

    def rule(*tally):
        return vec.decisions(*tally, config.max_drop, 0.05, t_canary, t_stable)

    better, _ = vec.simulate(rule, 0.95, 0.90, 200, 40_000, 0.10, config.min_feedback, seed=1)
    assert np.mean(better == 1) > 0.9
    worse, _ = vec.simulate(rule, 0.70, 0.90, 200, 40_000, 0.10, config.min_feedback, seed=2)
    assert np.mean(worse == -1) > 0.9


def test_the_interval_is_wide_with_little_feedback_and_shrinks():
    wide = difference_interval(Arm(10, 9), Arm(90, 81), 0.05, 100, 9000)
    narrow = difference_interval(Arm(10_000, 9_000), Arm(90_000, 81_000), 0.05, 100, 9000)
    assert wide[1] - wide[0] > 1.0
    assert narrow[1] - narrow[0] < 0.03 and narrow[0] < 0 < narrow[1]
    assert difference_interval(Arm(0, 0), Arm(90, 81), 0.05, 100, 9000) == (-1.0, 1.0)


def test_the_issues_example_is_now_a_few_points_wide():
    """Issue 46 point 10: at 1,166 canary outcomes (10 %, both 90 % correct) the normal
    mixture at Hoeffding's variance gave ±7.5 points; this gives [-3.3, +2.9]."""
    config = RolloutConfig(canary_percent=10, min_feedback=400, max_drop=0.05, confidence=0.95, max_hours=48)
    lo, hi = decide(config, Arm(1166, 1049), Arm(10_494, 9445), hours=1).figures["interval"]
    assert -0.035 < lo < -0.03 and 0.027 < hi < 0.031


def test_no_decision_before_min_feedback_and_undecided_at_max_hours():
    config = RolloutConfig(canary_percent=10, min_feedback=400, max_drop=0.5, confidence=0.95, max_hours=0.01)
    early = decide(config, Arm(399, 399), Arm(5000, 2500), hours=0.005)
    assert early.status == RolloutStatus.CANARY
    late = decide(config, Arm(399, 399), Arm(5000, 2500), hours=0.01)
    assert late.status == RolloutStatus.UNDECIDED and "fewer than 400 outcomes" in late.reason
    promoted = decide(config, Arm(400, 400), Arm(5000, 2500), hours=0.005)
    assert promoted.status == RolloutStatus.PROMOTED and promoted.figures["interval"][0] > -0.5
    assert "beta-binomial" in promoted.figures["method"]


@pytest.mark.parametrize(
    "raw, says",
    [
        ({"canary_percent": 0}, "canary_percent: 0 is outside (0, 100)"),
        ({"canary_percent": 100}, "canary_percent: 100 is outside (0, 100)"),
        ({"confidence": 1}, "confidence: 1 is outside (0.5, 1)"),
        ({"max_drop": float("nan")}, "max_drop: must be a number"),
        ({"max_hours": True}, "max_hours: must be a number"),
        ({"min_feedback": 10.5}, "min_feedback: must be a whole number"),
        ({"canary": 10}, "unknown field"),
        ([1, 2], "must be a mapping"),
    ],
)
def test_a_rollout_entry_out_of_range_is_refused_naming_the_field(raw, says):
    with pytest.raises(UsageError, match=says.replace("(", r"\(").replace(")", r"\)")):
        RolloutConfig.parse(raw, "rollout.p1")


def test_the_issues_example_parses():
    raw = {"canary_percent": 10, "min_feedback": 400, "max_drop": 0.02, "confidence": 0.95, "max_hours": 48}
    assert RolloutConfig.parse(raw).to_json() == {**raw, "canary_percent": 10.0, "max_hours": 48.0}


def test_the_shares_are_stored_only_when_set():
    """Issue 48's caps: a rollout without them stores (and syncs) as before; set, they are kept."""
    raw = {"canary_percent": 10, "min_feedback": 400, "max_drop": 0.02, "confidence": 0.95, "max_hours": 48}
    assert "max_process_share" not in RolloutConfig.parse(raw).to_json()
    assert RolloutConfig.parse(raw).max_process_share == 0.5 and RolloutConfig.parse(raw).max_token_share == 1.0
    shared = RolloutConfig.parse({**raw, "max_process_share": 1, "max_token_share": 0.5}).to_json()
    assert (shared["max_process_share"], shared["max_token_share"]) == (1.0, 0.5)
    with pytest.raises(UsageError, match="max_process_share: 0 is outside"):
        RolloutConfig.parse({**raw, "max_process_share": 0})
