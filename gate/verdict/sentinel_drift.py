"""Has a judge drifted during a run: a test over its sentinels in the order the judge answered
them, with its false-alarm rate bounded and its power stated (issue 46.6).

A test of the whole run's agreement (Fisher's, ``judge_stats.fisher_lower``) dilutes a late
drift: a judge that agrees as pinned for three quarters of a run and then flips every verdict
still agrees on most sentinels. The drift test here is a **Bernoulli CUSUM** (Page 1954,
"Continuous inspection schemes", Biometrika 41:100–115; for Bernoulli data Reynolds &
Stoumbos 1999, J Qual Technol 31:87–108) over the sentinels' outcomes in judge-call order:

    S₀ = 0,  Sₜ = max(0, Sₜ₋₁ + (w if sentinel t disagreed else −1)),  alarm when Sₜ ≥ h.

S is the evidence that the agreement of the most recent stretch of sentinels fell (a
change-point statistic: its largest value is the best suffix's score), with integer
weights, so its distribution is an exact Markov chain over 0..h−1 (``alarm_probability``).

**False alarms, at most 1 % per run by default**, bounded, not assumed: the judge's true
agreement is unknown, only its pinned evaluation (a agreed of N human items). The alarm
probability falls as the agreement rises, so

- p₀ is the exact one-sided Clopper–Pearson lower bound of the pinned agreement at
  ``PIN_ALPHA`` (0.5 %): the judge's true agreement is below it with probability ≤ 0.5 %;
- h is the smallest threshold whose alarm probability over the run's sentinels, computed
  exactly at p₀, is ≤ ``RUN_ALPHA`` (0.5 %).

So an honest judge (the same agreement during the run as when it was evaluated) alarms with
probability ≤ 0.5 % + 0.5 % = 1 %. The weight w is the CUSUM's log-likelihood-ratio weight
for a fall from p₀ to half of it, rounded to an integer (≥ 1).

**Power**: ``power`` is the exact probability of an alarm when the judge agrees at its pinned
share for the first part of the run and at ``to`` over its last quarter (the same Markov
chain, two phases); ``smallest_drift`` the highest ``to`` caught with 90 % probability:
"these 20 sentinels would catch, with 90 % probability, a judge whose agreement fell from
93 % to 31 % over the last quarter of the run".

Every alarm is final: S only ever crosses h once, so looking after every write-back costs no
false-alarm rate (the run stops at the first alarm; finalize sees the same sequence).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

PIN_ALPHA = 0.005  # the pinned agreement overstates the judge's
RUN_ALPHA = 0.005  # the run's sentinels alarm on an honest judge
FALSE_ALARM = PIN_ALPHA + RUN_ALPHA  # per run, at most
POWER = 0.9  # the probability the stated smallest drift is caught with
LATE_SHARE = 0.25  # the stated drift: over the last quarter of the run
DRIFT_TEST = "CUSUM of the sentinels in judge-call order against the pinned agreement, false alarms ≤ 1 %"


def binomial_upper(x: int, n: int, p: float) -> float:
    """P(X ≥ x) for X ~ Binomial(n, p): the regularized incomplete beta I_p(x, n − x + 1)
    (scipy's, exact for any n: a sum of n terms overflows a float past ~1,000 items)."""
    if x <= 0:
        return 1.0
    if x > n:
        return 0.0
    from scipy.special import betainc  # the worker's, not production's (gate.runtime never loads scipy)

    return float(betainc(x, n - x + 1, p))


def clopper_pearson_lower(agreed: int, n: int, alpha: float = PIN_ALPHA) -> float:
    """The exact one-sided lower confidence bound (Clopper & Pearson 1934, Biometrika
    26:404–413): the p at which ``agreed`` or more of ``n`` has probability ``alpha``, the
    ``alpha`` quantile of Beta(agreed, n − agreed + 1)."""
    if agreed <= 0 or n <= 0:
        return 0.0
    from scipy.special import betaincinv

    return float(betaincinv(agreed, n - agreed + 1, alpha))


def weight(p0: float) -> int:
    """The CUSUM's weight of a disagreement (an agreement weighs −1): the log-likelihood
    ratios of a fall from p₀ to p₀/2, rounded (Reynolds & Stoumbos 1999's integer scores)."""
    if p0 <= 0 or p0 >= 1:
        return 1
    q = p0 / 2
    return max(1, round(math.log((1 - q) / (1 - p0)) / math.log(p0 / q)))


def alarm_probability(phases: Sequence[tuple[int, float]], w: int, h: int) -> float:
    """Exactly, the probability that the CUSUM reaches ``h`` over sentinels that agree
    independently, ``phases`` giving (how many, the agreement) in order."""
    states = [0.0] * h
    states[0] = 1.0
    alarmed = 0.0
    for count, p in phases:
        for _ in range(count):
            moved = [0.0] * h
            for s, mass in enumerate(states):
                if not mass:
                    continue
                moved[max(0, s - 1)] += mass * p
                if s + w >= h:
                    alarmed += mass * (1 - p)
                else:
                    moved[s + w] += mass * (1 - p)
            states = moved
    return alarmed


@dataclass(frozen=True)
class Design:
    """A run's drift test: its sentinels, the pinned agreement, p₀, the weight and threshold."""

    planned: int
    pinned_agreed: int
    pinned_n: int
    p0: float
    w: int
    h: int

    @property
    def pinned(self) -> float:
        return self.pinned_agreed / self.pinned_n if self.pinned_n else 0.0

    def false_alarm(self) -> float:
        """The bound on an honest judge's alarm probability: the exact alarm probability at
        p₀ plus the chance the pinned agreement overstates the judge."""
        return alarm_probability([(self.planned, self.p0)], self.w, self.h) + PIN_ALPHA

    def power(self, to: float, late: float = LATE_SHARE) -> float:
        """Exactly, the probability of an alarm when the judge agrees at its pinned share,
        then at ``to`` over the run's last ``late`` share of sentinels."""
        last = math.ceil(self.planned * late)
        return alarm_probability([(self.planned - last, self.pinned), (last, to)], self.w, self.h)

    def smallest_drift(self, probability: float = POWER, late: float = LATE_SHARE) -> float | None:
        """The highest agreement over the last ``late`` of the run that is caught with
        ``probability`` (the smallest fall from the pinned share), None when even a judge
        that never agrees there is not."""
        if not self.planned or self.power(0.0, late) < probability:
            return None
        low, high = 0.0, self.pinned  # power(low) ≥ probability > power(high), or high itself
        if self.power(high, late) >= probability:
            return high
        for _ in range(40):
            mid = (low + high) / 2
            low, high = (mid, high) if self.power(mid, late) >= probability else (low, mid)
        return low

    def score(self, outcomes: Sequence[bool]) -> tuple[int, int]:
        """(the statistic's largest value, its last value) over the outcomes in order
        (True: the judge agreed)."""
        s = best = 0
        for agreed in outcomes:
            s = max(0, s + (-1 if agreed else self.w))
            best = max(best, s)
        return best, s


@lru_cache(maxsize=256)
def design(planned: int, pinned_agreed: int, pinned_n: int) -> Design:
    """The drift test of ``planned`` sentinels against a pinned agreement of ``pinned_agreed``
    of ``pinned_n``: the smallest threshold whose exact false-alarm probability at p₀ is ≤
    ``RUN_ALPHA``."""
    p0 = clopper_pearson_lower(pinned_agreed, pinned_n)
    w = weight(p0)
    h = w
    while alarm_probability([(planned, p0)], w, h) > RUN_ALPHA:
        h += 1
    return Design(planned, pinned_agreed, pinned_n, p0, w, h)


def drift(outcomes: Sequence[bool], planned: int, pinned_agreed: int, pinned_n: int) -> dict:
    """The sentinels so far, in judge-call order, against the pinned agreement: drifted (the
    CUSUM reached its threshold; final, so settled too), the statistic, and what the run's
    sentinels could catch."""
    test = design(max(planned, len(outcomes)), pinned_agreed, pinned_n)
    best, last = test.score(outcomes)
    drifted = bool(outcomes) and best >= test.h
    return {"drifted": drifted, "settled": drifted, "cusum": best, "threshold": test.h, "power": stated(test)}


@lru_cache(maxsize=256)
def stated(test: Design) -> dict:
    """What a run's sentinels could catch: with 90 % probability, a fall from the pinned share
    to ``to`` over the last quarter of the run (None: not even to 0), and the false-alarm bound."""
    to = test.smallest_drift()
    return {
        "probability": POWER,
        "late": LATE_SHARE,
        "from": round(test.pinned, 4),
        "to": None if to is None else round(to, 4),
        "false_alarm": round(test.false_alarm(), 4),
        "weight": test.w,
    }
