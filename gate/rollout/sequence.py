"""An always-valid confidence sequence for a correctness rate, and for the difference of two.

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

**Why not the betting or empirical-Bernstein sequences** (Waudby-Smith & Ramdas, JRSS-B
86(1), 2024): they depend on the order of the outcomes, and the rollout keeps a tally per
arm (``store.feedback.read_tally``), not the sequence. On 0/1 outcomes every bet
``1 + λ(x − p)`` is a likelihood ratio, so a mixture of bets is a mixture of likelihood
ratios: the beta-binomial mixture is that family's count-only member. ``t_opt``, the
number of outcomes where an arm's sequence is tightest, is fixed from the config before any
feedback arrives (``rule.figures_of``)."""

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


def beta_binomial_log_mixture(s: float, v: float, v_opt: float, g: float, h: float, alpha_opt: float) -> float:
    """``log M(s, v)``: the two-sided beta-binomial mixture at sum ``s`` and intrinsic time
    ``v`` for increments in ``[−g, h]``, tuned to ``v_opt`` at ``alpha_opt`` (module
    docstring)."""
    if g <= 0 or h <= 0:
        raise ValueError("g and h must be positive")
    r = max(best_rho(v_opt, alpha_opt) - g * h, 1e-3 * g * h)
    width = g + h
    return (
        v / (g * h) * math.log(width)
        - (v + h * s) / (h * width) * math.log(g)
        - (v - g * s) / (g * width) * math.log(h)
        + _log_beta((r + v - g * s) / (g * width), (r + v + h * s) / (h * width))
        - _log_beta(r / (g * width), r / (h * width))
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
