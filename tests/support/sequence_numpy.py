"""``gate.rollout.sequence`` vectorised (numpy, scipy): the rollout's decision on thousands
of tallies at once, for the simulations that measure it (``tests/unit/test_sequential.py``,
``bench/rollout_power.py``). The test checks this copy against the gate's own code on
random tallies, so the simulations measure what the worker runs."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import betainc, betaincc, betaln, gammaln
from scipy.stats import norm

from gate.rollout.sequence import NO_EVIDENCE_WEIGHT, TINY_TAIL, Arm, prior_size

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


def simulate(
    decide, canary_rate, stable_rate, rollouts, outcomes, canary_share, min_feedback, seed, chunk=500, block=None
):
    """Each rollout's first decision (+1, −1, 0 for none) and the canary outcomes it had
    then: the outcomes arrive one at a time, each the canary's with ``canary_share``, and
    the rule is applied after every one of them (once both arms have ``min_feedback``), up
    to ``outcomes`` in all. ``decide(nc, kc, ns, ks)`` → +1/−1/0 per tally, asked ``block``
    looks of each open rollout at a time (default: the whole chunk; the draws are the same)."""
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
        for left in range(0, steps, block or steps):  # a block of looks at a time: a decided rollout stops
            right = min(steps, left + (block or steps))
            open_ = np.flatnonzero(first == 0)
            window = (c_n[open_, left:right] >= min_feedback) & (s_n[open_, left:right] >= min_feedback)
            rows, cols = np.nonzero(window)
            if not rows.size:
                continue
            idx, cols = open_[rows], cols + left
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


# --- the one-sided tests the rollout decides with (gate.rollout.sequence, issue 46 point 10) ---


def log_one_sided(n, k, p, c: float, above: bool):
    """``sequence.log_one_sided_evidence`` on arrays (the same limits at 0 and 1, NaN where
    the gate's is)."""
    n, k, p = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (n, k, p)))
    inside = (p > 0) & (p < 1)
    q = np.where(inside, p, 0.5)
    a, b = c * q, c * (1 - q)
    tail = betaincc if above else betainc
    with np.errstate(all="ignore"):
        posterior, prior = tail(a + k, b + n - k, q), tail(a, b, q)
        two_sided = betaln(a + k, b + n - k) - betaln(a, b) - k * np.log(q) - (n - k) * np.log1p(-q)
        out = two_sided + np.log(np.maximum(posterior, TINY_TAIL)) - np.log(prior)
    out = np.where(posterior < TINY_TAIL, -np.inf, out)
    out = np.where((prior > 0) & np.isfinite(prior) & np.isfinite(posterior), out, np.nan)
    agrees = np.where(p <= 0, k == 0, k == n)
    impossible_side = (p <= 0) == above  # M+(0), M−(1)
    edge = np.where(agrees, 0.0, np.where(impossible_side, np.inf, -np.inf))
    return np.where(inside, out, edge)


def log_floored(log_m):
    """``sequence.log_floored`` on arrays."""
    log_m = np.where(np.isnan(log_m), -np.inf, log_m)
    with np.errstate(all="ignore"):
        return np.logaddexp(math.log1p(-NO_EVIDENCE_WEIGHT) + log_m, math.log(NO_EVIDENCE_WEIGHT))


def _sides(nc, kc, ns, ks, d: float, cc: float, cs: float, above: bool, ps):
    """(falling, rising) at stable rates ``ps`` (per tally, rows), as ``one_sided_evidence``."""
    canary = log_floored(log_one_sided(nc, kc, np.clip(ps + d, 0.0, 1.0), cc, above))
    stable = log_floored(log_one_sided(ns, ks, ps, cs, not above))
    return (canary, stable) if above else (stable, canary)


def one_sided_rejects(nc, kc, ns, ks, d: float, cc: float, cs: float, above: bool, threshold: float, rounds: int = 40):
    """``one_sided_evidence(..., target=threshold) >= threshold`` on arrays: the gate's search
    (``least_sum``) as a breadth-first branch and bound. Each tally starts with the gate's 32
    cells over the stable rate; a cell whose bound ``falling(x1) + rising(x0)`` reaches the
    threshold is settled, a sample below it settles the tally (no), the rest are halved. A
    tally left open after ``rounds``, or whose samples are not monotone, is asked of the gate."""
    from gate.rollout.sequence import CELLS, MONOTONE_SLACK, one_sided_evidence

    nc, kc, ns, ks = (np.asarray(x, dtype=float) for x in (nc, kc, ns, ks))
    m = nc.shape[0]
    low, high = max(0.0, -d), min(1.0, 1.0 - d)
    out = np.zeros(m, dtype=bool)
    if high < low:
        return np.ones(m, dtype=bool)
    # a probe near where the least usually is (the pooled rate under the null's edge): a sum
    # below the threshold there settles the tally (no) without the grid
    probe = np.clip((ks + kc - d * nc) / (ns + nc), low, high)
    f, r = _sides(nc, kc, ns, ks, d, cc, cs, above, probe)
    early = np.where(np.isnan(f + r), np.inf, f + r) < threshold
    if early.all():
        return out
    if early.any():
        keep = np.flatnonzero(~early)
        out[keep] = one_sided_rejects(nc[keep], kc[keep], ns[keep], ks[keep], d, cc, cs, above, threshold, rounds)
        return out
    grid = low + (high - low) * np.arange(CELLS + 1) / CELLS
    f, r = _sides(
        nc[:, None], kc[:, None], ns[:, None], ks[:, None], d, cc, cs, above, np.broadcast_to(grid, (m, CELLS + 1))
    )
    no = np.nanmin(np.where(np.isnan(f + r), np.inf, f + r), axis=1) < threshold
    tally = np.repeat(np.arange(m), CELLS)
    x0, x1 = np.tile(grid[:-1], m), np.tile(grid[1:], m)
    f0, f1, r0, r1 = f[:, :-1].ravel(), f[:, 1:].ravel(), r[:, :-1].ravel(), r[:, 1:].ravel()
    ask = np.zeros(m, dtype=bool)

    def check(f0, f1, r0, r1):
        slack_f = MONOTONE_SLACK * np.maximum(1.0, np.where(np.isfinite(f1), np.abs(f1), 1.0))
        slack_r = MONOTONE_SLACK * np.maximum(1.0, np.where(np.isfinite(r0), np.abs(r0), 1.0))
        return (f0 >= f1 - slack_f) & (r0 <= r1 + slack_r) & ~np.isnan(f1) & ~np.isnan(r0)

    ask[tally[~check(f0, f1, r0, r1)]] = True
    for _ in range(rounds):
        open_ = (f1 + r0 < threshold) & ~no[tally] & ~ask[tally]
        tally, x0, x1, f0, f1, r0, r1 = (a[open_] for a in (tally, x0, x1, f0, f1, r0, r1))
        if not tally.size:
            break
        mid = (x0 + x1) / 2
        fm, rm = _sides(nc[tally], kc[tally], ns[tally], ks[tally], d, cc, cs, above, mid)
        total = np.where(np.isnan(fm + rm), np.inf, fm + rm)
        np.logical_or.at(no, tally, total < threshold)
        bad = ~check(f0, fm, r0, rm) | ~check(fm, f1, rm, r1)
        ask[tally[bad]] = True
        tally = np.concatenate([tally, tally])
        x0, x1 = np.concatenate([x0, mid]), np.concatenate([mid, x1])
        f0, f1 = np.concatenate([f0, fm]), np.concatenate([fm, f1])
        r0, r1 = np.concatenate([r0, rm]), np.concatenate([rm, r1])
    else:
        ask[np.unique(tally[(f1 + r0 < threshold) & ~no[tally]])] = True
    ask &= ~no
    out = ~no
    for i in np.flatnonzero(ask):
        gate = one_sided_evidence(Arm(int(nc[i]), int(kc[i])), Arm(int(ns[i]), int(ks[i])), d, cc, cs, above, threshold)
        out[i] = gate >= threshold
    return out


def one_sided_decisions(
    nc, kc, ns, ks, max_drop: float, alpha: float, t_canary: float, t_stable: float, stable_guess=None
):
    """What ``rule.decide`` says of each tally once both arms have ``min_feedback``: +1
    promoted (the promotion test rejects Δ ≤ −max_drop), −1 rolled back (the roll-back test
    rejects Δ ≥ −max_drop), 0 neither. The search runs only where it can matter: the
    evidence at any one stable rate bounds the least from above, and there
    ``log M± ≤ log M − log(prior tail)`` (the posterior tail is at most 1), so a tally below
    the threshold at ``stable_guess`` (default: the stable arm's rate) is out without it."""
    cc, cs = prior_size(t_canary, alpha), prior_size(t_stable, alpha)
    nc, kc, ns, ks = (np.asarray(x, dtype=float) for x in (nc, kc, ns, ks))
    d = -max_drop
    threshold = math.log(1 / alpha)
    low, high = max(0.0, -d), min(1.0, 1.0 - d)
    out = np.zeros(nc.shape, dtype=int)
    for above, sign in ((True, 1), (False, -1)):
        if stable_guess is None:
            guess = np.clip(ks / ns, low, high)
            f, r = _sides(nc, kc, ns, ks, d, cc, cs, above, guess)
            quick = f + r
        else:
            guess = min(max(stable_guess, low), high)
            pc = min(max(guess + d, 0.0), 1.0)
            upper_c = log_evidence_at(nc, kc, pc, cc) - math.log(_tail(cc, pc, above)) if 0 < pc < 1 else np.inf
            upper_s = (
                log_evidence_at(ns, ks, guess, cs) - math.log(_tail(cs, guess, not above)) if 0 < guess < 1 else np.inf
            )
            quick = log_floored(upper_c) + log_floored(upper_s)
        maybe = np.flatnonzero((quick >= threshold) & (out == 0))
        if maybe.size:
            hit = one_sided_rejects(nc[maybe], kc[maybe], ns[maybe], ks[maybe], d, cc, cs, above, threshold)
            out[maybe[hit]] = sign
    return out


def _tail(c: float, p: float, above: bool) -> float:
    return float(betaincc(c * p, c * (1 - p), p) if above else betainc(c * p, c * (1 - p), p))
