"""The rollout's sequential tests (gate/rollout/sequence.py, gate/rollout/rule.py): their
mixtures (two-sided and one-sided) against the values published with the method's
reference implementation, the properties the infimum over the stable rate relies on
(monotone one-sided evidence), and the error they bound, a wrong promotion, in a simulation
of 2,000 rollouts at the boundary looked at after every outcome (vectorised:
``support.sequence_numpy``, checked here against the gate's own code)."""

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
    least_sum,
    log_evidence,
    log_floored,
    log_one_sided_evidence,
    one_sided_bounds,
    one_sided_evidence,
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


def test_the_one_sided_mixture_matches_the_published_reference_values():
    """confseq's unit tests (TestOneSidedBetaBinomialMixture, same V_OPT = 100, ALPHA_OPT =
    ALPHA = 0.05): the one-sided beta-binomial mixture with g = 0.2, h = 0.8 has log mixture
    -0.07134019 at s = 10, v = 100, its bound at v = 100 is 28.41238, and at v = 2·0.2·0.8
    the bound is s's upper limit v/g = 1.6 (the mixture never reaches log 20 below it)."""
    assert beta_binomial_log_mixture(10, 100, 100, 0.2, 0.8, 0.05, one_sided=True) == pytest.approx(
        -0.07134019, abs=1e-5
    )
    low, high = 0.0, 100 / 0.2
    for _ in range(100):
        middle = (low + high) / 2
        below = beta_binomial_log_mixture(middle, 100, 100, 0.2, 0.8, 0.05, one_sided=True) < math.log(20)
        low, high = (middle, high) if below else (low, middle)
    assert low == pytest.approx(28.41238, abs=1e-5)
    assert beta_binomial_log_mixture(1.6, 0.32, 100, 0.2, 0.8, 0.05, one_sided=True) < math.log(20)


def test_the_one_sided_evidence_is_that_mixture_in_its_bernoulli_form_and_mirrors():
    """log M+(p) (the rate above p) is the one-sided mixture with g = p, h = 1 - p, s = k - np,
    v = np(1 - p), its prior worth prior_size(t_opt, 2 alpha) outcomes (confseq tunes the
    one-sided mixture at 2 alpha); log M-(p) of k correct of n is log M+(1 - p) of n - k."""
    rng = random.Random(461)
    for _ in range(200):
        n = rng.randint(1, 50_000)
        k, p, t_opt = rng.randint(0, n), rng.uniform(0.001, 0.999), rng.choice([1, 50, 400, 36_000])
        v = p * (1 - p)
        general = beta_binomial_log_mixture(k - n * p, n * v, v * t_opt, p, 1 - p, 0.05, one_sided=True)
        if general < -50:  # deep in the no-evidence tail: the incomplete beta function's digits run out
            continue
        c = prior_size(t_opt, 0.10)
        above = log_one_sided_evidence(Arm(n, k), p, c, above=True)
        assert log_one_sided_evidence(Arm(n, n - k), 1 - p, c, above=False) == pytest.approx(above, abs=1e-6)
        if above == -math.inf:  # a posterior tail under 1e-290 is taken as none: only where there is none
            assert general < 0
        else:
            assert above == pytest.approx(general, abs=1e-6)


def test_the_one_sided_evidence_is_monotone_in_the_rate_tested():
    """What makes the infimum rigorous and the null composite (module docstring): M+(p) never
    rises with p, M-(p) never falls, on 999-point grids for random tallies and priors, the
    arm's martingale floored at w as the tests use it (to rounding)."""
    rng = random.Random(46)
    grid = [i / 1000 for i in range(1, 1000)]
    for _ in range(60):
        n = rng.choice([1, 3, 30, 400, 5000, 40_000])
        arm, c = Arm(n, rng.randint(0, n)), prior_size(rng.choice([1, 100, 400, 36_000, 9e7]), 0.05)
        for above in (True, False):
            values = [log_floored(log_one_sided_evidence(arm, p, c, above)) for p in grid]
            steps = [(b - a) * (1 if above else -1) for a, b in zip(values, values[1:])]
            assert max(steps) <= 1e-7 * max(1.0, max(abs(x) for x in values)), (arm, c, above)


def test_the_infimum_is_a_rigorous_lower_bound_and_refuses_what_is_not_monotone():
    """least_sum on a falling + rising pair with a narrow, off-grid dip (a sum a golden-section
    search misses: it is not convex) gives at most the true minimum and within its
    tolerance of it; a pair that is not monotone gives no evidence (-inf)."""

    def falling(x):
        return -50 * math.tanh((x - 0.61803) * 400)

    def rising(x):
        return 50 * math.tanh((x - 0.61803) * 300) + 10 * x

    true = min(falling(x) + rising(x) for x in [i / 200_000 for i in range(200_001)])
    bound = least_sum(falling, rising, 0.0, 1.0)
    assert true - 0.01 <= bound <= true  # within INFIMUM_TOLERANCE unless MAX_CELLS ran out first
    assert least_sum(falling, rising, 0.0, 1.0, target=true + 1) < true + 1
    assert least_sum(falling, rising, 0.0, 1.0, target=true - 1) >= true - 1
    assert least_sum(lambda x: math.sin(20 * x), rising, 0.0, 1.0) == -math.inf


def test_nan_and_underflow_count_as_no_evidence():
    """Where the tails underflow or cannot be computed the arm's martingale is taken at its
    floor w (it is never below), never above: the safe side."""
    assert log_floored(math.nan) == log_floored(-math.inf) == pytest.approx(math.log(1e-3))
    far = log_one_sided_evidence(Arm(40_000, 4_000), 0.99, prior_size(400, 0.05), above=True)
    assert far == -math.inf
    assert log_one_sided_evidence(Arm(10, 3), 0.0, 5.0, above=False) == -math.inf  # M-(0): k > 0 contradicts it
    assert log_one_sided_evidence(Arm(10, 10), 1.0, 5.0, above=True) == 0.0


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
    boundary, it gives the gate's one-sided tests' verdicts and the gate's decisions."""
    config = RolloutConfig(canary_percent=10, min_feedback=100, max_drop=0.05, confidence=0.95, max_hours=48)
    t_canary, t_stable = tuning(config)
    cc, cs = prior_size(t_canary, 0.05), prior_size(t_stable, 0.05)
    rng = random.Random(10)
    tallies = []
    for _ in range(40):
        nc = rng.randint(100, 3000)
        ns = rng.randint(100, 30_000)
        ps = rng.uniform(0.6, 0.98)
        pc = min(0.999, max(0.0, ps - 0.05 + rng.gauss(0, 2.5 / math.sqrt(nc))))
        tallies.append((nc, round(nc * pc), ns, round(ns * ps)))
    nc, kc, ns, ks = (np.array(column, dtype=float) for column in zip(*tallies))
    said = vec.one_sided_decisions(nc, kc, ns, ks, 0.05, 0.05, t_canary, t_stable)
    guessed = vec.one_sided_decisions(nc, kc, ns, ks, 0.05, 0.05, t_canary, t_stable, stable_guess=0.8)
    promote = vec.one_sided_rejects(nc, kc, ns, ks, -0.05, cc, cs, True, math.log(20))
    kinds = {RolloutStatus.PROMOTED: 1, RolloutStatus.ROLLED_BACK: -1, RolloutStatus.CANARY: 0}
    for i, (a, b, c, d) in enumerate(tallies):
        canary, stable = Arm(a, b), Arm(c, d)
        own = one_sided_evidence(canary, stable, -0.05, cc, cs, True, math.log(20)) >= math.log(20)
        assert bool(promote[i]) == own, tallies[i]
        assert said[i] == guessed[i] == kinds[decide(config, canary, stable, hours=0).status], tallies[i]
    assert {-1, 0, 1} <= set(said.tolist())  # the sample has every kind of decision
    # the two-sided copy (the bench's "before" row) still gives the gate's two-sided evidence
    copied = vec.difference_evidence(nc[:10], kc[:10], ns[:10], ks[:10], -0.05, cc, cs)
    for i, (a, b, c, d) in enumerate(tallies[:10]):
        assert copied[i] == pytest.approx(difference_evidence(Arm(a, b), Arm(c, d), -0.05, cc, cs), abs=1e-6)


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
    outcomes: measured 26 promoted and 26 rolled back of 2,000 (0.013 each; the two-sided
    test before: 12 and 6), bound 1 - confidence = 0.05 for each (+ 0.01 for the
    simulation's own noise). A fixed-sample (Wald) interval looked at as often promotes 393
    of them (0.197): the check can fail."""
    alpha = 1 - BOUNDARY.confidence
    t_canary, t_stable = tuning(BOUNDARY)
    started = time.perf_counter()
    promoted, rolled_back = boundary_rollouts(
        lambda *t: vec.one_sided_decisions(*t, BOUNDARY.max_drop, alpha, t_canary, t_stable, stable_guess=0.90)
    )
    assert promoted <= alpha + 0.01, promoted
    assert rolled_back <= alpha + 0.01, rolled_back
    naive, _ = boundary_rollouts(lambda *t: vec.wald_decisions(*t, BOUNDARY.max_drop, alpha))
    assert naive > alpha + 0.01, naive  # peeking breaks a fixed-sample interval
    assert time.perf_counter() - started < 60  # ~4 s on a quiet machine: vectorised


def test_a_clearly_better_or_worse_canary_is_decided():
    config = RolloutConfig(canary_percent=10, min_feedback=200, max_drop=0.05, confidence=0.95, max_hours=48)
    t_canary, t_stable = tuning(config)

    def rule(*tally):
        return vec.one_sided_decisions(*tally, config.max_drop, 0.05, t_canary, t_stable, stable_guess=0.90)

    better, _ = vec.simulate(rule, 0.95, 0.90, 200, 40_000, 0.10, config.min_feedback, seed=1, block=25)
    assert np.mean(better == 1) > 0.9
    worse, _ = vec.simulate(rule, 0.70, 0.90, 200, 40_000, 0.10, config.min_feedback, seed=2, block=25)
    assert np.mean(worse == -1) > 0.9


def test_the_interval_is_wide_with_little_feedback_and_shrinks():
    for bounds in (difference_interval, one_sided_bounds):
        wide = bounds(Arm(10, 9), Arm(90, 81), 0.05, 100, 9000)
        narrow = bounds(Arm(10_000, 9_000), Arm(90_000, 81_000), 0.05, 100, 9000)
        assert wide[1] - wide[0] > 0.7
        assert narrow[1] - narrow[0] < 0.03 and narrow[0] < 0 < narrow[1]
        assert bounds(Arm(0, 0), Arm(90, 81), 0.05, 100, 9000) == (-1.0, 1.0)


def test_the_issues_example_is_now_a_few_points_wide():
    """Issue 46 point 10: at 1,166 canary outcomes (10 %, both 90 % correct) the normal
    mixture at Hoeffding's variance gave ±7.5 points; the two-sided beta-binomial interval
    [-3.3, +2.9]; the one-sided bounds, each at 95 %, are [-3.0, +2.5]."""
    config = RolloutConfig(canary_percent=10, min_feedback=400, max_drop=0.05, confidence=0.95, max_hours=48)
    decision = decide(config, Arm(1166, 1049), Arm(10_494, 9445), hours=1)
    lo, hi = decision.figures["interval"]
    assert -0.031 < lo < -0.029 and 0.024 < hi < 0.026
    assert "each one-sided at 95 %" in decision.reason
    assert decision.figures["evidence"]["promote"] == pytest.approx(10.04, abs=0.01)


def test_a_canary_two_points_behind_with_700_outcomes_is_promoted():
    """Issue 46 point 10's power, on one tally: 624 of 700 canary (89.1 %) against 5,670 of
    6,300 stable (90 %), max_drop 5 points. The two-sided interval's lower end was -5.2
    points (held); the one-sided lower bound is -4.7 (promoted), and that is the figure the
    decision says."""
    config = RolloutConfig(canary_percent=10, min_feedback=400, max_drop=0.05, confidence=0.95, max_hours=48)
    decision = decide(config, Arm(700, 624), Arm(6300, 5670), hours=1)
    assert decision.status == RolloutStatus.PROMOTED
    assert -0.05 < decision.figures["interval"][0] < -0.045
    assert decision.figures["decisive"] == ["promote"]


def test_the_bounds_are_where_the_tests_switch():
    """lo is the largest d whose null (Δ ≤ d) the promotion test rejects, hi the smallest
    whose (Δ ≥ d) the roll-back test rejects: just inside each, the test rejects; just
    outside, not."""
    canary, stable = Arm(900, 790), Arm(8100, 7300)
    alpha, t_canary, t_stable = 0.05, 400, 36_000
    cc, cs = prior_size(t_canary, alpha), prior_size(t_stable, alpha)
    lo, hi = one_sided_bounds(canary, stable, alpha, t_canary, t_stable)
    threshold = math.log(1 / alpha)
    assert one_sided_evidence(canary, stable, lo, cc, cs, True, threshold) >= threshold
    assert one_sided_evidence(canary, stable, lo + 1e-3, cc, cs, True, threshold) < threshold
    assert one_sided_evidence(canary, stable, hi, cc, cs, False, threshold) >= threshold
    assert one_sided_evidence(canary, stable, hi - 1e-3, cc, cs, False, threshold) < threshold
    assert lo < 790 / 900 - 7300 / 8100 < hi


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
        ({"hold_undecided": "yes"}, "hold_undecided: must be true or false"),
    ],
)
def test_a_rollout_entry_out_of_range_is_refused_naming_the_field(raw, says):
    with pytest.raises(UsageError, match=says.replace("(", r"\(").replace(")", r"\)")):
        RolloutConfig.parse(raw, "rollout.p1")


def test_the_issues_example_parses():
    raw = {"canary_percent": 10, "min_feedback": 400, "max_drop": 0.02, "confidence": 0.95, "max_hours": 48}
    assert RolloutConfig.parse(raw).to_json() == {**raw, "canary_percent": 10.0, "max_hours": 48.0}


def test_hold_undecided_is_kept_when_set_and_left_out_when_not():
    """An UNDECIDED canary holds its config only when the rollout says so (issue 47); a
    rollout pinned without the field reads as before."""
    held = RolloutConfig.parse({"hold_undecided": True})
    assert held.hold_undecided and held.to_json()["hold_undecided"] is True
    assert RolloutConfig.from_json(held.to_json()) == held
    assert "hold_undecided" not in RolloutConfig.parse({}).to_json()
    assert not RolloutConfig.from_json({"max_hours": 1}).hold_undecided


def test_the_production_runtime_does_not_load_scipy():
    """scipy is the rollout worker's (its one-sided tests), imported where they run: a process
    that serves prompts (gate.runtime) or reads a rollout config never loads it."""
    import subprocess
    import sys

    code = "import sys, gate.runtime, gate.rollout.rule, gate.rollout.sequence; print('scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_shares_are_stored_only_when_set():
    """Issue 48's caps: a rollout without them stores (and syncs) as before; set, they are kept."""
    raw = {"canary_percent": 10, "min_feedback": 400, "max_drop": 0.02, "confidence": 0.95, "max_hours": 48}
    assert "max_process_share" not in RolloutConfig.parse(raw).to_json()
    assert RolloutConfig.parse(raw).max_process_share == 0.5 and RolloutConfig.parse(raw).max_token_share == 1.0
    shared = RolloutConfig.parse({**raw, "max_process_share": 1, "max_token_share": 0.5}).to_json()
    assert (shared["max_process_share"], shared["max_token_share"]) == (1.0, 0.5)
    with pytest.raises(UsageError, match="max_process_share: 0 is outside"):
        RolloutConfig.parse({**raw, "max_process_share": 0})
