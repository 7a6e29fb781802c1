"""An always-valid confidence sequence for a proportion, and for the difference of two.

**Method.** The two-sided normal-mixture boundary (Robbins 1970) as Howard, Ramdas, McAuliffe
and Sekhon state it in "Time-uniform, nonparametric, nonasymptotic confidence sequences",
*The Annals of Statistics* 49(2):1055–1080 (2021), eq. (14): for a sum ``S`` of centred
observations, sub-Gaussian with variance process ``v``, the probability that
``|S| ≥ u(v)`` at *any* time is at most ``α``, with

    u(v) = sqrt((v + ρ) · log((v + ρ) / (ρ · α²)))

A correctness outcome (0 or 1) less its mean is 1/4-sub-Gaussian (Hoeffding's lemma), so
after ``n`` outcomes ``v = n / 4`` and the rate's interval is ``rate ± u(n/4) / n``: valid at
every ``n`` at once, so the rollout worker may look after every batch of feedback without
the error rate growing with the looks (a fixed-n interval looked at repeatedly would reject
a true null far more often than ``α``). ``ρ`` sets where the boundary is tightest:
``v_opt / (2 log(1/α) + log(1 + 2 log(1/α)))`` makes it tightest at ``v_opt`` (the
``best_rho`` of the authors' reference implementation, confseq); the rollout worker tunes
it to the rollout's ``min_feedback`` (``v_opt = min_feedback / 4``), fixed before any
feedback arrives. ``tests/unit/test_sequential.py`` checks ``u`` and ``ρ`` against the
values published with that implementation and the type-I error over 2,000 simulated null
rollouts.

**Two arms.** Canary and stable are independent samples of different sizes; each arm's
sequence is taken at ``α/2`` and the difference's interval is ``[Lc − Us, Uc − Ls]``: by
the union bound both arms' sequences hold at every look with probability at least
``1 − α``, and so does the difference's. Conservative (the union bound and Hoeffding's
variance ``1/4`` both give away width), never anti-conservative."""

from __future__ import annotations

import math
from dataclasses import dataclass


def best_rho(v_opt: float, alpha: float) -> float:
    """The mixture precision that makes the two-sided boundary tightest at ``v_opt``."""
    if v_opt <= 0 or not 0 < alpha < 1:
        raise ValueError("v_opt must be positive and alpha in (0, 1)")
    log_inv = math.log(1 / alpha)
    return v_opt / (2 * log_inv + math.log(1 + 2 * log_inv))


def normal_mixture_bound(v: float, alpha: float, rho: float) -> float:
    """``u(v)``: the two-sided normal-mixture boundary on ``|S|`` at intrinsic time ``v``."""
    return math.sqrt((v + rho) * math.log((v + rho) / (rho * alpha * alpha)))


def log_mixture(s: float, v: float, rho: float) -> float:
    """The log of the mixture martingale at sum ``s`` and time ``v`` (crossing
    ``log(1/α)`` is crossing ``u(v)``)."""
    return 0.5 * math.log(rho / (v + rho)) + s * s / (2 * (v + rho))


@dataclass(frozen=True)
class Arm:
    """One arm's outcomes: how many calls were judged, how many of them correct."""

    n: int
    correct: int

    @property
    def rate(self) -> float | None:
        return self.correct / self.n if self.n else None


def rate_interval(arm: Arm, alpha: float, rho: float) -> tuple[float, float]:
    """The arm's rate, always valid at level ``1 − alpha``, clipped to [0, 1]; [0, 1] with
    no outcome yet."""
    if arm.n <= 0:
        return 0.0, 1.0
    radius = normal_mixture_bound(arm.n / 4, alpha, rho) / arm.n
    rate = arm.correct / arm.n
    return max(0.0, rate - radius), min(1.0, rate + radius)


def difference_interval(canary: Arm, stable: Arm, alpha: float, v_opt: float) -> tuple[float, float]:
    """canary − stable, always valid at level ``1 − alpha`` (each arm at ``alpha / 2``,
    its ρ tuned to ``v_opt``)."""
    rho = best_rho(v_opt, alpha / 2)
    c_lo, c_hi = rate_interval(canary, alpha / 2, rho)
    s_lo, s_hi = rate_interval(stable, alpha / 2, rho)
    return max(-1.0, c_lo - s_hi), min(1.0, c_hi - s_lo)
