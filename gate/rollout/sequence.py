"""An always-valid confidence sequence for a correctness rate, and one-sided tests for the difference of two.

**Method: an exact, variance-adaptive mixture martingale per arm.** A correctness outcome is
0 or 1, so the rate ``p`` fixes its variance, ``p(1 − p)``: the likelihood itself adapts to
the variance, with no plug-in estimate. Howard, Ramdas, McAuliffe and Sekhon, "Time-uniform,
nonparametric, nonasymptotic confidence sequences", *The Annals of Statistics* 49(2):1055–1080
(2021), give for a sub-Bernoulli sum (increments in ``[−g, h]``) the two-sided
**beta-binomial conjugate mixture**; the closed form below is the one their reference
implementation, confseq, codes (``uniform_boundaries.h``, ``BetaBinomialMixture::log_superMG``
with ``x = 1``, and the paper's equation number is not repeated here because it was not
checked against the published text): with ``B`` the beta function and ``r``
tuned to ``v_opt`` (``r = max(ρ − gh, 10⁻³ gh)``, ``ρ = best_rho(v_opt, α_opt)``),

    log M(s, v) = v/(gh) · log(g + h) − (v + hs)/(h(g + h)) · log g − (v − gs)/(g(g + h)) · log h
                  + log B((r + v − gs)/(g(g + h)), (r + v + hs)/(h(g + h)))
                  − log B(r/(g(g + h)), r/(h(g + h)))

For ``n`` outcomes of which ``k`` are correct, tested against the rate ``p`` (``g = p``,
``h = 1 − p``, ``s = k − np``, ``v = np(1 − p)``, ``v_opt = p(1 − p)·t_opt``), this is
``M_n(p) = B(cp + k, c(1 − p) + n − k) / B(cp, c(1 − p)) / (p^k (1 − p)^(n−k))``: the
likelihood ratio of a Beta prior centred on ``p`` (``c`` prior outcomes, set by ``t_opt``)
against ``p`` itself, a nonnegative martingale of mean 1 when ``p`` is the true rate, so by
Ville's inequality it ever reaches ``1/α`` with probability at most ``α``, however often it
is looked at. Its width follows ``p(1 − p)``: at 90 % correct the variance is 0.09, not
Hoeffding's worst case 1/4. One arm's interval, ``{p : M_n(p) < 1/α}``, is the authors'
``bernoulli_confidence_interval``; ``tests/unit/test_sequential.py`` checks ``log M``, its
boundary and that interval against the values published with confseq.

**Two arms, without a union bound.** Canary and stable are independent streams of
different sizes, interleaved. Under the true rates ``(p_c, p_s)`` the product
``M_c(p_c) · M_s(p_s)`` is again a nonnegative martingale of mean 1 (each outcome moves one
factor only, by a factor of conditional mean 1), so its infimum over the rates with
``p_c − p_s = d``,

    E_n(d) = min over p_s of  M_c(p_s + d) · M_s(p_s)

is at most it when ``d`` is the true difference and reaches ``1/α`` with probability at
most ``α`` (the infimum over a composite null of test martingales: Ramdas, Grünwald, Vovk
and Shafer, "Game-theoretic statistics and safe anytime-valid inference", *Statistical
Science* 38(4), 2023). The difference's interval is ``{d : E_n(d) < 1/α}``: both arms'
evidence adds up under one ``α`` instead of each arm spending ``α/2`` and the two widths
adding. Each ``log M(p)`` is convex in ``p`` (``−log`` of the likelihood is; the test checks
the whole, prior included, on random tallies), so ``log E_n(d)`` is convex in ``d``, the set
is an interval around the observed difference, and a golden-section search (over ``p_s``)
and a regula falsi (for each end) find it; each end is reported on its wide side.

**One side at a time: what the rollout decides with.** Promotion needs only ``Δ > −δ``
(``δ = max_drop``) and roll-back only ``Δ < −δ``, so each is its own one-sided test at
``α = 1 − confidence``, and the interval above, which spends evidence on both sides of each
end, is not what decides. ``M+(p)`` is the mixture with its Beta prior truncated to
``q > p`` (evidence that the rate is above ``p``: confseq's one-sided
``BetaBinomialMixture``, checked against its published values), ``M−(p)`` the mirror; each
is a likelihood-ratio mixture, a nonnegative martingale of mean 1 under rate ``p``. Each arm
keeps ``w = NO_EVIDENCE_WEIGHT`` of its weight on the constant martingale 1,
``F = (1 − w)·M + w`` (still a test martingale): at a rate of 0 or 1 an arm cannot show the
side it is asked (``M−(0) = 0`` once one outcome is correct), and the floor makes that cost
``log(1/w)``, not the whole test. The promotion test's null is the composite
``Δ ≤ −δ``: every ``(p_c, p_s)`` with ``p_c ≤ p_s − δ``, under each of which
``F_c+(p_c)·F_s−(p_s)`` is a test martingale; its evidence is the least of them,

    log E+ = min over p_s in [δ, 1] of  log F_c+(p_s − δ) + log F_s−(p_s)  ≥  log(1/α),

which is the infimum over the whole composite null because ``M+(p)`` never rises with
``p`` and ``M−(p)`` never falls (the prior moves with ``p``, so this is not automatic: it
is checked on 999-point grids for random tallies and priors in the test, and at run time on
every rate the search samples, where a violation beyond rounding counts as no evidence).
Monotone, but not convex (on most tallies), so the minimum is not searched for, it is
bounded: on a cell ``[x0, x1]`` the sum is at least ``log F_c+(x1 − δ) + log F_s−(x0)``;
``least_sum`` halves the cell with the lowest bound until that bound is within 10⁻³ of the
lowest sum seen (or, deciding, until every cell is above ``log(1/α)`` or a sum below it is
seen), and reports the bound: never more than the infimum. Roll-back is the mirror test
(``F_c−``, ``F_s+``, null ``Δ ≥ −δ``) with its own ``α``; at the boundary ``Δ = −δ`` the
two nulls meet, and each wrong decision has chance at most ``α``. A tail that underflows
or cannot be computed (NaN) counts as ``M = 0``, i.e. ``F = w``: the safe side. The bounds
reported, ``one_sided_bounds``, are where each test switches: the lower one at level
``1 − α`` one-sided, the upper one likewise (``[lo, hi]`` covers ``Δ`` at ``1 − 2α``).

**Why not the betting or empirical-Bernstein sequences** (Waudby-Smith & Ramdas, JRSS-B
86(1), 2024): they depend on the order of the outcomes, and the rollout keeps a tally per
arm (``store.feedback.read_tally``), not the sequence. On 0/1 outcomes every bet
``1 + λ(x − p)`` is a likelihood ratio, so a mixture of bets is a mixture of likelihood
ratios: the beta-binomial mixture is that family's count-only member. ``t_opt``, the
number of outcomes where an arm's sequence is tightest, is fixed from the config before any
feedback arrives (``rule.tuning``). The scipy import (the incomplete beta function) is done
where the one-sided tests run: the production runtime never loads it."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

GOLDEN = (math.sqrt(5) - 1) / 2
SEARCH_STEPS = 40  # golden-section steps over the stable rate: the bracket shrinks to 0.618^40 ≈ 4e-9
TOLERANCE = 1e-9  # each end of an interval, to within this (on its wide side)
MAX_STEPS = 100


def best_rho(v_opt: float, alpha: float) -> float:
    """The normal mixture's precision that makes the two-sided boundary tightest at
    ``v_opt`` (confseq's ``TwoSidedNormalMixture::best_rho``; the beta-binomial mixture is
    tuned from it)."""
    if v_opt <= 0 or not 0 < alpha < 1:
        raise ValueError("v_opt must be positive and alpha in (0, 1)")
    log_inv = math.log(1 / alpha)
    return v_opt / (2 * log_inv + math.log(1 + 2 * log_inv))


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def beta_binomial_log_mixture(
    s: float, v: float, v_opt: float, g: float, h: float, alpha_opt: float, one_sided: bool = False
) -> float:
    """``log M(s, v)``: the beta-binomial mixture at sum ``s`` and intrinsic time ``v`` for
    increments in ``[−g, h]``, tuned to ``v_opt`` at ``alpha_opt`` (module docstring);
    ``one_sided``: its prior truncated to the upper side (confseq's ``is_one_sided``: the
    incomplete beta function at ``x = h/(g + h)``, tuned with the one-sided normal mixture's
    ``ρ = best_rho(v_opt, 2·alpha_opt)``), evidence that the mean is above 0 only."""
    if g <= 0 or h <= 0:
        raise ValueError("g and h must be positive")
    rho = best_rho(v_opt, 2 * alpha_opt) if one_sided else best_rho(v_opt, alpha_opt)
    r = max(rho - g * h, 1e-3 * g * h)
    width = g + h
    a, b = (r + v - g * s) / (g * width), (r + v + h * s) / (h * width)
    a0, b0 = r / (g * width), r / (h * width)
    tails = 0.0
    if one_sided:
        from scipy.special import betainc  # noqa: PLC0415 - the rollout worker's only; runtime stays light

        x = h / width
        upper = float(betainc(a, b, x))
        if not upper > 0:
            return -math.inf  # the tail underflows: no evidence
        tails = math.log(upper) - math.log(float(betainc(a0, b0, x)))
    return (
        v / (g * h) * math.log(width)
        - (v + h * s) / (h * width) * math.log(g)
        - (v - g * s) / (g * width) * math.log(h)
        + _log_beta(a, b)
        - _log_beta(a0, b0)
        + tails
    )


@dataclass(frozen=True)
class Arm:
    """One arm's outcomes: how many calls were judged, how many of them correct."""

    n: int
    correct: int

    @property
    def rate(self) -> float | None:
        return self.correct / self.n if self.n else None


def prior_size(t_opt: float, alpha_opt: float) -> float:
    """``c``: the outcomes the Beta prior is worth when the mixture is tuned to be tightest
    after ``t_opt`` outcomes (``r / (p(1 − p))`` with ``v_opt = p(1 − p)·t_opt``: the same
    for every ``p``)."""
    return max(best_rho(t_opt, alpha_opt) - 1, 1e-3)


def log_evidence(arm: Arm, p: float, c: float) -> float:
    """``log M_n(p)``: the arm's evidence against ``p`` being its rate, the beta-binomial
    mixture with ``g = p``, ``h = 1 − p`` in its Bernoulli form (module docstring), the prior
    worth ``c`` outcomes (``prior_size``); at ``p`` 0 or 1: 0 when the outcomes agree with
    it, infinite when one contradicts it."""
    if p <= 0:
        return 0.0 if arm.correct == 0 else math.inf
    if p >= 1:
        return 0.0 if arm.correct == arm.n else math.inf
    k, wrong = arm.correct, arm.n - arm.correct
    return (
        _log_beta(c * p + k, c * (1 - p) + wrong)
        - _log_beta(c * p, c * (1 - p))
        - k * math.log(p)
        - wrong * math.log(1 - p)
    )


def rate_interval(arm: Arm, alpha: float, t_opt: float, alpha_opt: float = 0.05) -> tuple[float, float]:
    """The arm's rate, always valid at level ``1 − alpha`` (confseq's
    ``bernoulli_confidence_interval``); [0, 1] with no outcome yet."""
    if arm.n <= 0:
        return 0.0, 1.0
    rate = arm.correct / arm.n
    threshold = math.log(1 / alpha)

    c = prior_size(t_opt, alpha_opt)

    def excess(p: float) -> float:
        return log_evidence(arm, p, c) - threshold

    return _edge(excess, rate, 0.0), _edge(excess, rate, 1.0)


def _edge(excess: Callable[[float], float], centre: float, end: float) -> float:
    """Where the convex set ``excess < 0`` around ``centre`` ends on the way to ``end``:
    ``end`` itself when it is inside, else a point within ``TOLERANCE`` outside the set's
    edge (the wide side). Regula falsi, Illinois variant (it keeps the edge bracketed and
    needs ~10 steps where bisection needs 40)."""
    f_far = excess(end)
    if f_far < 0:
        return end
    near, far, f_near = centre, end, excess(centre)
    side = 0
    for _ in range(MAX_STEPS):
        if abs(far - near) <= TOLERANCE:
            break
        if math.isfinite(f_far) and f_far > f_near:
            middle = far - f_far * (far - near) / (f_far - f_near)
            if not min(near, far) < middle < max(near, far):
                middle = (near + far) / 2
        else:
            middle = (near + far) / 2
        f_middle = excess(middle)
        if f_middle < 0:
            near, f_near = middle, f_middle
            if side == -1:
                f_far /= 2
            side = -1
        else:
            far, f_far = middle, f_middle
            if side == 1:
                f_near /= 2
            side = 1
    return far


def difference_evidence(canary: Arm, stable: Arm, d: float, c_canary: float, c_stable: float) -> float:
    """``log E_n(d)``: the least evidence against ``canary rate − stable rate = d`` over the
    stable rates that allow it (a golden-section search: the function is convex), each
    arm's prior worth ``c_canary`` / ``c_stable`` outcomes (``prior_size``)."""
    low, high = max(0.0, -d), min(1.0, 1.0 - d)
    if high < low:
        return math.inf

    def total(p_s: float) -> float:
        return log_evidence(canary, p_s + d, c_canary) + log_evidence(stable, p_s, c_stable)

    best = min(total(low), total(high))
    a, b = low, high
    x1, x2 = b - GOLDEN * (b - a), a + GOLDEN * (b - a)
    f1, f2 = total(x1), total(x2)
    for _ in range(SEARCH_STEPS):
        if f1 <= f2:
            b, x2, f2 = x2, x1, f1
            x1 = b - GOLDEN * (b - a)
            f1 = total(x1)
        else:
            a, x1, f1 = x1, x2, f2
            x2 = a + GOLDEN * (b - a)
            f2 = total(x2)
    return min(best, f1, f2)


def difference_interval(
    canary: Arm, stable: Arm, alpha: float, t_canary: float, t_stable: float
) -> tuple[float, float]:
    """canary − stable, always valid at level ``1 − alpha``: ``{d : E_n(d) < 1/alpha}``,
    each arm's mixture tuned to be tightest at ``t_canary`` / ``t_stable`` outcomes;
    [−1, 1] until both arms have an outcome."""
    if canary.n <= 0 or stable.n <= 0:
        return -1.0, 1.0
    threshold = math.log(1 / alpha)
    observed = canary.correct / canary.n - stable.correct / stable.n
    c_canary, c_stable = prior_size(t_canary, alpha), prior_size(t_stable, alpha)

    def excess(d: float) -> float:
        return difference_evidence(canary, stable, d, c_canary, c_stable) - threshold

    return _edge(excess, observed, -1.0), _edge(excess, observed, 1.0)


# ---------------------------------------------------------------------------------------------
# One-sided tests (issue 46 point 10): what the rollout decides with (module docstring, "One side
# at a time").

TINY_TAIL = 1e-290  # a posterior tail below it is taken as 0 (subnormal floats lose their digits)
NO_EVIDENCE_WEIGHT = 1e-3  # w: each arm's martingale is (1 − w)·M± + w·1, never below w
CELLS = 32  # the first grid over the stable rate; cells near the minimum are then halved
MAX_CELLS = 600  # evaluations at most per infimum; unresolved cells count as no evidence
INFIMUM_TOLERANCE = 1e-3  # in log evidence: the bound is this close to the best value found
MONOTONE_SLACK = 1e-7  # rounding allowed in the monotonicity check, relative to the value


def log_one_sided_evidence(arm: Arm, p: float, c: float, above: bool) -> float:
    """``log M+(p)`` (``above``: evidence that the rate is above ``p``) or ``log M−(p)``: the
    beta-binomial mixture with its Beta(``cp``, ``c(1 − p)``) prior truncated to the side
    tested (confseq's one-sided ``BetaBinomialMixture``, ``x = h/(g + h)``),

        log M+(p) = log_evidence(p) + log P(q > p | Beta(cp + k, c(1 − p) + n − k))
                                    − log P(q > p | Beta(cp, c(1 − p)))

    (``M−``: the lower tails). At ``p`` 0 or 1 the limits (``M+(1)``, ``M−(0)``: 1 when the
    outcomes agree with it, 0 when one contradicts it; ``M+(0)``, ``M−(1)``: 1 or infinite).
    NaN where the tails cannot be computed: the caller counts it as no evidence."""
    from scipy.special import betainc, betaincc  # noqa: PLC0415 - the rollout worker's only; runtime stays light

    k, n = arm.correct, arm.n
    if p <= 0 or p >= 1:
        agrees = k == 0 if p <= 0 else k == n
        if (p <= 0) == above:  # M+(0) or M−(1): against the impossible side
            return 0.0 if agrees else math.inf
        return 0.0 if agrees else -math.inf
    tail = betaincc if above else betainc
    a, b = c * p, c * (1 - p)
    posterior, prior = float(tail(a + k, b + n - k, p)), float(tail(a, b, p))
    if not prior > 0 or not math.isfinite(prior) or not math.isfinite(posterior):
        return math.nan
    if posterior < TINY_TAIL:
        return -math.inf  # the tail underflows (or nearly: its log loses digits): nil, counted as w
    return log_evidence(arm, p, c) + math.log(posterior) - math.log(prior)


def log_floored(log_m: float) -> float:
    """``log((1 − w)·M + w)``: the arm's martingale with ``w`` of its weight on no evidence (the
    constant 1), so it never falls below ``w``; NaN counts as ``M = 0`` (a lower bound: the
    safe side)."""
    if math.isnan(log_m) or log_m == -math.inf:
        return math.log(NO_EVIDENCE_WEIGHT)
    if log_m == math.inf:
        return math.inf
    big, small = math.log1p(-NO_EVIDENCE_WEIGHT) + log_m, math.log(NO_EVIDENCE_WEIGHT)
    top = max(big, small)
    return top + math.log1p(math.exp(min(big, small) - top))


def least_sum(
    falling: Callable[[float], float],
    rising: Callable[[float], float],
    low: float,
    high: float,
    target: float | None = None,
) -> float:
    """A rigorous lower bound of ``min over x in [low, high] of falling(x) + rising(x)``, for
    ``falling`` non-increasing and ``rising`` non-decreasing: on a cell ``[x0, x1]`` the sum is
    at least ``falling(x1) + rising(x0)``. The cell with the lowest bound is halved until that
    bound is within ``INFIMUM_TOLERANCE`` of the lowest sum seen, or (with ``target``) until
    every cell is at or above it or a sum below it is seen. The sampled values are checked to
    be monotone (to rounding): if not, −inf (no evidence)."""
    import heapq  # noqa: PLC0415

    xs = [low + (high - low) * i / CELLS for i in range(CELLS + 1)]
    values = [(falling(x), rising(x)) for x in xs]
    best = math.inf
    heap: list[tuple[float, float, float, float, float, float, float]] = []

    def seen(f: float, r: float) -> float:
        total = f + r
        return math.inf if math.isnan(total) else total

    def push(x0: float, x1: float, f0: float, r0: float, f1: float, r1: float) -> bool:
        slack0 = MONOTONE_SLACK * max(1.0, abs(f1) if math.isfinite(f1) else 1.0)
        slack1 = MONOTONE_SLACK * max(1.0, abs(r0) if math.isfinite(r0) else 1.0)
        if f0 < f1 - slack0 or r0 > r1 + slack1 or math.isnan(f1) or math.isnan(r0):
            return False
        heapq.heappush(heap, (f1 + r0, x0, x1, f0, r0, f1, r1))
        return True

    for (x0, (f0, r0)), (x1, (f1, r1)) in zip(zip(xs, values), zip(xs[1:], values[1:])):
        if not push(x0, x1, f0, r0, f1, r1):
            return -math.inf
    for f, r in values:
        best = min(best, seen(f, r))
    for _ in range(MAX_CELLS):
        bound, x0, x1, f0, r0, f1, r1 = heap[0]
        if target is not None and (bound >= target or best < target):
            return min(bound, best)
        if best - bound <= INFIMUM_TOLERANCE or x1 - x0 <= 1e-15:
            return min(bound, best)
        heapq.heappop(heap)
        middle = (x0 + x1) / 2
        fm, rm = falling(middle), rising(middle)
        best = min(best, seen(fm, rm))
        if not (push(x0, middle, f0, r0, fm, rm) and push(middle, x1, fm, rm, f1, r1)):
            return -math.inf
    return min(heap[0][0], best)


def one_sided_evidence(
    canary: Arm, stable: Arm, d: float, c_canary: float, c_stable: float, above: bool, target: float | None = None
) -> float:
    """``log`` of the least evidence, over every pair of rates in the composite null, that
    ``canary rate − stable rate`` is above ``d`` (``above``: against ``Δ ≤ d``, what promotion
    needs at ``d = −max_drop``) or below it (against ``Δ ≥ d``, what roll-back needs): a rigorous
    lower bound (``least_sum``) of ``min over p_s of log F_c±(p_s + d) + log F_s∓(p_s)``, each
    ``F = (1 − w)·M + w`` (module docstring)."""
    low, high = max(0.0, -d), min(1.0, 1.0 - d)
    if high < low:
        return math.inf

    def canary_side(p_s: float) -> float:
        return log_floored(log_one_sided_evidence(canary, min(1.0, max(0.0, p_s + d)), c_canary, above))

    def stable_side(p_s: float) -> float:
        return log_floored(log_one_sided_evidence(stable, p_s, c_stable, not above))

    if above:  # F_c+ falls with the rate, F_s− rises
        return least_sum(canary_side, stable_side, low, high, target)
    return least_sum(stable_side, canary_side, low, high, target)


def one_sided_bounds(
    canary: Arm, stable: Arm, alpha: float, t_canary: float, t_stable: float, steps: int = 16
) -> tuple[float, float]:
    """The difference's lower bound (the largest ``d`` whose ``Δ ≤ d`` the promotion test
    rejects) and upper bound (the smallest ``d`` whose ``Δ ≥ d`` the roll-back test rejects),
    each always valid one-sided at level ``1 − alpha`` (together ``1 − 2·alpha``); each by
    bisection, kept on its wide side (a rejected ``d``), to ``2^−steps`` of the range; [−1, 1]
    until both arms have an outcome."""
    if canary.n <= 0 or stable.n <= 0:
        return -1.0, 1.0
    threshold = math.log(1 / alpha)
    c_canary, c_stable = prior_size(t_canary, alpha), prior_size(t_stable, alpha)

    def rejects(d: float, above: bool) -> bool:
        return one_sided_evidence(canary, stable, d, c_canary, c_stable, above, threshold) >= threshold

    def edge(above: bool) -> float:
        # the rejected d form [−1, lo] (above) or [hi, 1]: Δ ≤ d is a smaller null as d falls
        rejected, kept = (-1.0, 1.0) if above else (1.0, -1.0)
        if rejects(kept, above):
            return kept
        if not rejects(rejected, above):
            return rejected
        for _ in range(steps):
            middle = (rejected + kept) / 2
            if rejects(middle, above):
                rejected = middle
            else:
                kept = middle
        return rejected

    return edge(True), edge(False)
