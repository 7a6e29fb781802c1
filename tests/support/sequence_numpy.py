"""``gate.rollout.sequence`` vectorised (numpy, scipy): the rollout's decision on thousands
of tallies at once, for the simulations that measure it (``tests/unit/test_sequential.py``,
``bench/rollout_power.py``). The test checks this copy against the gate's own code on
random tallies, so the simulations measure what the worker runs."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import betaln, gammaln
from scipy.stats import norm

from gate.rollout.sequence import prior_size

GOLDEN = (math.sqrt(5) - 1) / 2


def log_evidence(n, k, p, c):
    """``sequence.log_evidence`` on arrays (``p`` outside (0, 1): infinite)."""
    inside = (p > 0) & (p < 1)
    q = np.where(inside, p, 0.5)
    out = betaln(c * q + k, c * (1 - q) + n - k) - betaln(c * q, c * (1 - q)) - k * np.log(q) - (n - k) * np.log(1 - q)
    return np.where(inside, out, np.inf)


def log_evidence_at(n, k, p: float, c: float):
    """``log_evidence`` at one rate ``p`` for whole-number tallies: the same sum, its
    log-gamma terms looked up in tables (what makes the simulations' first pass cheap)."""
    n, k = np.asarray(n, dtype=np.int64), np.asarray(k, dtype=np.int64)
    top = int(n.max(initial=0)) + 1
    whole = np.arange(top + 1, dtype=float)
    right, wrong, both = gammaln(c * p + whole), gammaln(c * (1 - p) + whole), gammaln(c + whole)
    return right[k] + wrong[n - k] - both[n] - betaln(c * p, c * (1 - p)) - k * math.log(p) - (n - k) * math.log(1 - p)


def difference_evidence(nc, kc, ns, ks, d: float, cc: float, cs: float, steps: int = 40):
    """``sequence.difference_evidence`` on arrays: the golden-section search over the
    stable rate, each tally its own bracket."""
    nc, kc, ns, ks = (np.asarray(x, dtype=float) for x in (nc, kc, ns, ks))
    a = np.full(nc.shape, max(0.0, -d))
    b = np.full(nc.shape, min(1.0, 1.0 - d))

    def total(ps):
        return log_evidence(nc, kc, ps + d, cc) + log_evidence(ns, ks, ps, cs)

    x1, x2 = b - GOLDEN * (b - a), a + GOLDEN * (b - a)
    f1, f2 = total(x1), total(x2)
    for _ in range(steps):
        left = f1 <= f2
        b = np.where(left, x2, b)
        a = np.where(left, a, x1)
        x1, x2 = np.where(left, b - GOLDEN * (b - a), x2), np.where(left, x1, a + GOLDEN * (b - a))
        new = total(np.where(left, x1, x2))
        f1, f2 = np.where(left, new, f2), np.where(left, f1, new)
    return np.minimum(f1, f2)


def decisions(nc, kc, ns, ks, max_drop: float, alpha: float, t_canary: float, t_stable: float, stable_guess=None):
    """What ``rule.decide`` says of each tally once both arms have ``min_feedback``: +1
    promoted, −1 rolled back, 0 neither (−max_drop outside the interval, on the side of
    the observed difference). The search runs only where it can matter: the evidence at
    any one stable rate bounds its minimum from above, so a tally below the threshold there
    (``stable_guess``, default a pooled estimate) is undecided without it."""
    cc, cs = prior_size(t_canary, alpha), prior_size(t_stable, alpha)
    nc, kc, ns, ks = (np.asarray(x, dtype=float) for x in (nc, kc, ns, ks))
    d = -max_drop
    threshold = math.log(1 / alpha)
    low, high = max(0.0, -d), min(1.0, 1.0 - d)
    if stable_guess is None:
        guess = np.clip((ks + kc - d * nc) / (ns + nc), low + 1e-9, high - 1e-9)
        quick = log_evidence(nc, kc, guess + d, cc) + log_evidence(ns, ks, guess, cs)
    else:
        quick = log_evidence_at(nc, kc, stable_guess + d, cc) + log_evidence_at(ns, ks, stable_guess, cs)
    out = np.zeros(nc.shape, dtype=int)
    maybe = np.flatnonzero(quick >= threshold)
    if maybe.size:
        full = difference_evidence(nc[maybe], kc[maybe], ns[maybe], ks[maybe], d, cc, cs)
        hit = maybe[full >= threshold]
        out[hit] = np.where(kc[hit] / nc[hit] - ks[hit] / ns[hit] > d, 1, -1)
    return out


def normal_mixture_decisions(nc, kc, ns, ks, max_drop: float, alpha: float, v_opt: float):
    """The interval before issue 46.10: the two-sided normal mixture at Hoeffding's variance
    1/4 per arm, each at α/2, the difference ``[Lc − Us, Uc − Ls]``."""
    a = alpha / 2
    log_inv = math.log(1 / a)
    rho = v_opt / (2 * log_inv + math.log(1 + 2 * log_inv))

    def radius(n):
        v = n / 4
        return np.sqrt((v + rho) * np.log((v + rho) / (rho * a * a))) / n

    lo = np.maximum(0, kc / nc - radius(nc)) - np.minimum(1, ks / ns + radius(ns))
    hi = np.minimum(1, kc / nc + radius(nc)) - np.maximum(0, ks / ns - radius(ns))
    return np.where(lo > -max_drop, 1, np.where(hi < -max_drop, -1, 0))


def wald_decisions(nc, kc, ns, ks, max_drop: float, alpha: float):
    """A fixed-sample (Wald) interval, as if each look were the only one: what a naive
    worker would do."""
    pc, ps = kc / nc, ks / ns
    half = norm.ppf(1 - alpha / 2) * np.sqrt(pc * (1 - pc) / nc + ps * (1 - ps) / ns)
    diff = pc - ps
    return np.where(diff - half > -max_drop, 1, np.where(diff + half < -max_drop, -1, 0))


def simulate(decide, canary_rate, stable_rate, rollouts, outcomes, canary_share, min_feedback, seed, chunk=500):
    """Each rollout's first decision (+1, −1, 0 for none) and the canary outcomes it had
    then: the outcomes arrive one at a time, each the canary's with ``canary_share``, and
    the rule is applied after every one of them (once both arms have ``min_feedback``), up
    to ``outcomes`` in all. ``decide(nc, kc, ns, ks)`` → +1/−1/0 per tally."""
    rng = np.random.default_rng(seed)
    first = np.zeros(rollouts, dtype=int)
    at = np.full(rollouts, -1)
    nc, kc, ns, ks = (np.zeros(rollouts) for _ in range(4))
    for start in range(0, outcomes, chunk):
        steps = min(chunk, outcomes - start)
        u = rng.random((rollouts, steps), dtype=np.float32)  # one draw: which arm, and right or wrong
        canary = u < canary_share
        right = np.where(canary, u < canary_share * canary_rate, u < canary_share + (1 - canary_share) * stable_rate)
        c_n = nc[:, None] + np.cumsum(canary, axis=1)
        c_k = kc[:, None] + np.cumsum(canary & right, axis=1)
        s_n = ns[:, None] + np.cumsum(~canary, axis=1)
        s_k = ks[:, None] + np.cumsum(~canary & right, axis=1)
        nc, kc, ns, ks = c_n[:, -1], c_k[:, -1], s_n[:, -1], s_k[:, -1]
        open_ = np.flatnonzero(first == 0)
        rows, cols = np.nonzero((c_n[open_] >= min_feedback) & (s_n[open_] >= min_feedback))
        if not rows.size:
            continue
        idx = open_[rows]
        got = decide(c_n[idx, cols], c_k[idx, cols], s_n[idx, cols], s_k[idx, cols])
        for i, col, g in zip(idx[got != 0], cols[got != 0], got[got != 0]):  # row-major: earliest first
            if first[i] == 0:
                first[i], at[i] = g, int(c_n[i, col])
    return first, at


def fixed_sample_size(rate: float, max_drop: float, alpha: float, power: float, canary_share: float) -> float:
    """Canary outcomes a fixed-sample (one look) test needs to show non-inferiority with
    ``power`` when both versions are ``rate`` correct (the lower end of the two-sided
    ``1 − alpha`` interval above −max_drop)."""
    variance = rate * (1 - rate) * (1 + canary_share / (1 - canary_share))
    return (norm.ppf(1 - alpha / 2) + norm.ppf(power)) ** 2 * variance / max_drop**2
