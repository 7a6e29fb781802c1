"""The rollout's sequential test (gate/rollout/sequence.py, gate/rollout/rule.py): its
boundary against the values published with the method's reference implementation, and
its type-I error in a simulation of 2,000 null rollouts looked at after every batch of
feedback, as the rollout worker looks."""

from __future__ import annotations

import bisect
import math
import random

import pytest

from gate.errors import UsageError
from gate.rollout.rule import RolloutConfig, decide
from gate.rollout.sequence import Arm, best_rho, difference_interval, log_mixture, normal_mixture_bound
from gate.states import RolloutStatus


def test_the_boundary_matches_the_published_reference_values():
    """Howard, Ramdas, McAuliffe & Sekhon (2021) publish a reference implementation,
    confseq, whose unit tests (test/uniform_boundaries_unittest.cpp, "all target values are
    from a reference implementation in R") give for the two-sided normal mixture with
    v_opt = 100 and alpha = 0.05: best_rho = 12.60056, the log mixture at s = 10, v = 100
    = -0.6510052, and the bound at v = 100 = 30.35209."""
    rho = best_rho(100, 0.05)
    assert rho == pytest.approx(12.60056, abs=1e-5)
    assert log_mixture(10, 100, rho) == pytest.approx(-0.6510052, abs=1e-5)
    assert normal_mixture_bound(100, 0.05, rho) == pytest.approx(30.35209, abs=1e-5)
    # crossing the bound is the mixture crossing log(1/alpha)
    assert log_mixture(30.35209, 100, rho) == pytest.approx(math.log(20), abs=1e-5)


def binomial_sampler(n: int, p: float):
    """Exact Binomial(n, p) draws by the inverse of its CDF (one uniform each)."""
    cdf, total = [], 0.0
    for k in range(n + 1):
        total += math.comb(n, k) * p**k * (1 - p) ** (n - k)
        cdf.append(total)
    return lambda rng: min(bisect.bisect_left(cdf, rng.random() * cdf[-1]), n)


def simulate(config: RolloutConfig, canary_rate: float, stable_rate: float, rollouts: int, looks: int, decide_at):
    """The fraction of rollouts decided (promoted or rolled back) within ``looks`` looks,
    each look after a batch of 200 calls' feedback, ``canary_percent`` of them the canary's."""
    rng = random.Random(20240939)
    canary_batch = round(200 * config.canary_percent / 100)
    draw_c = binomial_sampler(canary_batch, canary_rate)
    draw_s = binomial_sampler(200 - canary_batch, stable_rate)
    decided = 0
    for _ in range(rollouts):
        c = s = 0
        for look in range(1, looks + 1):
            c, s = c + draw_c(rng), s + draw_s(rng)
            canary, stable = Arm(look * canary_batch, c), Arm(look * (200 - canary_batch), s)
            if decide_at(config, canary, stable):
                decided += 1
                break
    return decided / rollouts


def by_the_rule(config, canary, stable) -> bool:
    return decide(config, canary, stable, hours=0).status != RolloutStatus.CANARY


def by_a_fixed_sample_interval(config, canary, stable) -> bool:
    """What a naive worker would do: a 95 % Wald interval, as if each look were the only one."""
    if canary.n < config.min_feedback:
        return False
    pc, ps = canary.correct / canary.n, stable.correct / stable.n
    half = 1.959964 * math.sqrt(pc * (1 - pc) / canary.n + ps * (1 - ps) / stable.n)
    diff = pc - ps
    return diff - half > -config.max_drop or diff + half < -config.max_drop


NULL = RolloutConfig(canary_percent=10, min_feedback=400, max_drop=0.02, confidence=0.95, max_hours=48)


def test_the_type_one_error_of_2000_null_rollouts_stays_under_one_minus_confidence():
    """True difference exactly -max_drop (stable 90 %, canary 88 %): any decision is an
    error. 2,000 rollouts, a look after every 200 calls' feedback, 200 looks each (4,000
    canary and 36,000 stable outcomes): measured 0 of 2,000 (0.000), bound 0.05. The same
    simulation with a fixed-sample (Wald) interval looked at as often errs in 604 of them
    (0.302), so it tells a valid sequential test from one that is not."""
    errors = simulate(NULL, 0.88, 0.90, 2000, 200, by_the_rule)
    assert errors <= 1 - NULL.confidence, errors
    naive = simulate(NULL, 0.88, 0.90, 2000, 200, by_a_fixed_sample_interval)
    assert naive > 1 - NULL.confidence, naive  # peeking breaks a fixed-n interval: the check can fail


def test_a_clearly_better_or_worse_canary_is_decided():
    config = RolloutConfig(canary_percent=10, min_feedback=200, max_drop=0.05, confidence=0.95, max_hours=48)
    assert simulate(config, 0.95, 0.90, 200, 200, lambda *a: decide(*a, hours=0).status == RolloutStatus.PROMOTED) > 0.9
    worse = simulate(config, 0.70, 0.90, 200, 200, lambda *a: decide(*a, hours=0).status == RolloutStatus.ROLLED_BACK)
    assert worse > 0.9


def test_the_interval_is_wide_with_little_feedback_and_shrinks():
    wide = difference_interval(Arm(10, 9), Arm(90, 81), 0.05, 100)
    narrow = difference_interval(Arm(10_000, 9_000), Arm(90_000, 81_000), 0.05, 100)
    assert wide[1] - wide[0] > 1.0
    assert narrow[1] - narrow[0] < 0.06 and narrow[0] < 0 < narrow[1]


def test_no_decision_before_min_feedback_and_undecided_at_max_hours():
    config = RolloutConfig(canary_percent=10, min_feedback=400, max_drop=0.5, confidence=0.95, max_hours=0.01)
    early = decide(config, Arm(399, 399), Arm(5000, 2500), hours=0.005)
    assert early.status == RolloutStatus.CANARY
    late = decide(config, Arm(399, 399), Arm(5000, 2500), hours=0.01)
    assert late.status == RolloutStatus.UNDECIDED and "fewer than 400 outcomes" in late.reason
    promoted = decide(config, Arm(400, 400), Arm(5000, 2500), hours=0.005)
    assert promoted.status == RolloutStatus.PROMOTED and promoted.figures["interval"][0] > -0.5


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
