"""How many canary outcomes the rollout's always-valid test needs to decide, against a
fixed-sample test (issue 46 point 10). No database: a decision depends only on each arm's
tally, so this draws tallies for 2,000 rollouts at once and applies the rule to them
(``tests/support/sequence_numpy.py``, the gate's ``gate.rollout.sequence`` vectorised;
``tests/unit/test_sequential.py`` checks the copy against the gate's code).

Scenario (the issue's): both versions 90 % correct, ``max_drop`` 5 points, confidence
95 %, the canary 10 % of the feedback, ``min_feedback`` 400, the rule applied after every
outcome. Reported: the canary outcomes by which 50 % and 90 % of the rollouts are promoted,
against a fixed-sample (one look) non-inferiority test with 90 % power at the same level,
``n = (z_0.975 + z_0.9)² · Var / δ²``; the same for the methods before (the two-sided
beta-binomial interval of 89d05cf, and the normal mixture at Hoeffding's variance 1/4, each
arm at α/2); and the wrong promotions and roll-backs at the boundary (the canary truly 5
points worse), with a naive fixed-sample interval looked at as often.

    python bench/rollout_power.py [--rollouts 2000] [--min-feedback 400]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support import sequence_numpy as vec  # noqa: E402

from gate.rollout.rule import RolloutConfig, tuning  # noqa: E402

ALPHA, DROP, SHARE, RATE = 0.05, 0.05, 0.10, 0.90


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--min-feedback", type=int, default=400)
    parser.add_argument("--outcomes", type=int, default=60_000, help="outcomes in all before a rollout gives up")
    args = parser.parse_args()
    config = RolloutConfig(
        canary_percent=SHARE * 100, min_feedback=args.min_feedback, max_drop=DROP, confidence=1 - ALPHA
    )
    t_canary, t_stable = tuning(config)
    fixed = vec.fixed_sample_size(RATE, DROP, ALPHA, 0.9, SHARE)
    print(
        f"both {RATE:.0%} correct, max_drop {DROP * 100:g} points, confidence {1 - ALPHA:.0%}, canary {SHARE:.0%}, "
        f"min_feedback {args.min_feedback}, {args.rollouts:,} rollouts, the rule after every outcome"
    )
    print(f"fixed-sample test, 90 % power: {fixed:,.0f} canary outcomes ({fixed / SHARE:,.0f} in all)")

    def now(*tally):
        return vec.one_sided_decisions(*tally, DROP, ALPHA, t_canary, t_stable, stable_guess=RATE)

    methods = [
        ("one-sided beta-binomial mixtures, joined (now)", now, 25),
        (
            "two-sided beta-binomial mixtures, joined (89d05cf)",
            lambda *t: vec.decisions(*t, DROP, ALPHA, t_canary, t_stable),
            None,
        ),
        (
            "normal mixture at 1/4, alpha/2 each (before)",
            lambda *t: vec.normal_mixture_decisions(*t, DROP, ALPHA, args.min_feedback / 4),
            None,
        ),
    ]
    needed = {}
    for name, rule, block in methods:
        started = time.perf_counter()
        first, at = vec.simulate(
            rule, RATE, RATE, args.rollouts, args.outcomes, SHARE, args.min_feedback, seed=46, block=block
        )
        when = np.where(first == 1, at, np.inf)
        q50, q90 = float(np.quantile(when, 0.5)), float(np.quantile(when, 0.9))
        needed[name] = q90
        print(
            f"{name}: promoted {np.mean(first == 1):.3f}, rolled back {np.mean(first == -1):.3f}; "
            f"50 % promoted by {q50:,.0f} canary outcomes ({q50 / fixed:.2f}x fixed), "
            f"90 % by {q90:,.0f} ({q90 / fixed:.2f}x fixed)  [{time.perf_counter() - started:.1f} s]"
        )
    for name, rule in [
        ("now", now),
        ("a fixed-sample (Wald) interval at every look", lambda *t: vec.wald_decisions(*t, DROP, ALPHA)),
    ]:
        started = time.perf_counter()
        first, _ = vec.simulate(rule, RATE - DROP, RATE, args.rollouts, 12_000, SHARE, args.min_feedback, seed=47)
        print(
            f"at the boundary (canary {RATE - DROP:.0%}, 12,000 outcomes), {name}: wrong promotions "
            f"{int(np.sum(first == 1))} of {args.rollouts:,} ({np.mean(first == 1):.4f}), rolled back "
            f"{int(np.sum(first == -1))}, bound {ALPHA}  [{time.perf_counter() - started:.1f} s]"
        )
    now = needed[methods[0][0]]
    ratio = now / fixed
    print(
        f"RESULT rollout_power: 90 % promoted by {now:,.0f} canary outcomes (target <= 2x the fixed-sample "
        f"{fixed:,.0f}; two-sided {needed[methods[1][0]]:,.0f}, before {needed[methods[2][0]]:,.0f}) "
        f"ratio {ratio:.2f} {'PASS' if ratio <= 2 else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
