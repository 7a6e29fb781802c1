"""A prompt's canary rollout as the gate config declares it (``RolloutConfig``) and the rule
the rollout worker applies at each look (``decide``)::

    rollout:
      ticket-urgency: {canary_percent: 10, min_feedback: 400, max_drop: 0.02, confidence: 0.95, max_hours: 48}

With ``Δ = canary rate − stable rate`` on production's feedback, once each arm has
``min_feedback`` outcomes: **promote** when the one-sided always-valid test at ``confidence``
shows ``Δ > −max_drop`` (the canary no worse than the stable version by more than
``max_drop``: non-inferiority), **roll back** when the mirror test shows ``Δ < −max_drop``
(worse by more than that: inferiority); each test spends ``1 − confidence``
(``gate.rollout.sequence``: one-sided beta-binomial mixtures, joined without a union bound).
Neither after ``max_hours``: **undecided** (the stable version keeps serving). The chance
that a rollout whose true ``Δ`` is ``−max_drop`` or less ends promoted is at most
``1 − confidence``, and so is the chance that one whose ``Δ`` is ``−max_drop`` or more ends
rolled back, however often the worker looks. What a look reports as the interval
``[lo, hi]`` is the two tests' bounds: ``lo`` the one-sided lower bound at ``confidence``
(promoted exactly when ``lo > −max_drop``, to the bisection's 2⁻¹⁶), ``hi`` the one-sided
upper bound at ``confidence`` (rolled back when ``hi < −max_drop``); together they cover
``Δ`` at ``1 − 2·(1 − confidence)``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from gate.errors import UsageError
from gate.states import RolloutStatus

from .sequence import Arm, one_sided_bounds, one_sided_evidence, prior_size

METHOD = (
    "always-valid one-sided tests (a one-sided beta-binomial mixture per version, joined without a union bound; "
    "Howard et al. 2021, Ann. Statist. 49(2))"
)
BOUNDS = "each end one-sided at confidence"
# field: (lowest, highest, lowest allowed itself, highest allowed itself, default)
RANGES: dict[str, tuple[float, float, bool, bool, float]] = {
    "canary_percent": (0, 100, False, False, 10),
    "min_feedback": (1, 10_000_000, True, True, 400),
    "max_drop": (0, 1, True, False, 0.02),
    "confidence": (0.5, 1, False, False, 0.95),
    "max_hours": (0, 8760, False, True, 48),
    "max_process_share": (0, 1, False, True, 0.5),  # one process's share of an arm's outcomes counted
    "max_token_share": (0, 1, False, True, 1),  # one token's (1: a fleet on one runtime token decides)
}
SHARES = ("max_process_share", "max_token_share")

FIELDS = (*RANGES, "hold_undecided")


@dataclass(frozen=True)
class RolloutConfig:
    canary_percent: float = 10.0  # share of calls the canary answers
    min_feedback: int = 400  # outcomes each arm needs before a decision
    max_drop: float = 0.02  # how far below the stable rate the canary may be (a fraction)
    confidence: float = 0.95  # the sequential test's level: 1 − its type-I error
    max_hours: float = 48.0  # undecided after this long (fractions allowed: 0.01 h = 36 s)
    hold_undecided: bool = False  # an UNDECIDED canary's config is held as a ROLLED_BACK one's always is
    max_process_share: float = 0.5  # issue 48: the most of an arm's counted outcomes one process gives
    max_token_share: float = 1.0  # the same for one token (store.feedback.read_tally applies both)

    @classmethod
    def parse(cls, raw: Any, where: str = "rollout") -> RolloutConfig:
        """A ``rollout:`` entry, each field checked and named when refused (UsageError)."""
        if not isinstance(raw, Mapping):
            raise UsageError(f"{where}: must be a mapping of {', '.join(RANGES)}")
        unknown = [k for k in raw if k not in FIELDS]
        if unknown:
            raise UsageError(f"{where}.{str(unknown[0])[:40]}: unknown field; a rollout has {', '.join(FIELDS)}")
        hold_undecided = raw.get("hold_undecided", False)
        if not isinstance(hold_undecided, bool):
            raise UsageError(f"{where}.hold_undecided: must be true or false")
        values = {key: _number(raw.get(key, spec[4]), key, spec, where) for key, spec in RANGES.items()}
        min_feedback = int(values["min_feedback"])
        if min_feedback != raw.get("min_feedback", 400):
            raise UsageError(f"{where}.min_feedback: must be a whole number")
        return cls(
            canary_percent=values["canary_percent"],
            min_feedback=min_feedback,
            max_drop=values["max_drop"],
            confidence=values["confidence"],
            max_hours=values["max_hours"],
            hold_undecided=hold_undecided,
            max_process_share=values["max_process_share"],
            max_token_share=values["max_token_share"],
        )

    def to_json(self) -> dict[str, Any]:
        """The fields; ``hold_undecided`` only when set, the shares (issue 48) only when not at
        their defaults, so a rollout stored before them reads, and syncs, as the same."""
        found = asdict(self)
        if not self.hold_undecided:
            del found["hold_undecided"]
        for key in SHARES:
            if found[key] == RANGES[key][4]:
                del found[key]
        return found

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RolloutConfig:
        return cls(**{k: data[k] for k in FIELDS if k in data})

    def describe(self) -> str:
        return (
            f"canary {_num(self.canary_percent)} %, min feedback {self.min_feedback:,}, max drop "
            f"{_num(self.max_drop * 100)} points, confidence {_num(self.confidence * 100)} %, "
            f"max {_num(self.max_hours)} h" + (", an undecided canary held" if self.hold_undecided else "")
        )


def _number(value: Any, key: str, spec: tuple[Any, ...], where: str) -> float:
    low, high, low_ok, high_ok, _ = spec
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"{where}.{key}: must be a number")
    if value < low or value > high or (value == low and not low_ok) or (value == high and not high_ok):
        left, right = "[" if low_ok else "(", "]" if high_ok else ")"
        raise UsageError(f"{where}.{key}: {value!r} is outside {left}{_num(low)}, {_num(high)}{right}")
    return float(value)


def _num(value: float) -> str:
    return format(value, "g")


@dataclass(frozen=True)
class Decision:
    status: RolloutStatus  # CANARY: hold (look again later)
    figures: dict[str, Any]
    reason: str


def tuning(config: RolloutConfig) -> tuple[float, float]:
    """Where each version's mixture is tightest (``t_opt``, in outcomes), fixed by the config
    before any feedback: the canary's at ``min_feedback``; the stable version's, which only
    has to pin its own rate while the canary's decides, ten times the stable outcomes that
    come with it. ``bench/rollout_power.py`` chose the ten: at 10 % canary, stable
    ``t_opt`` from 20,000 to 100,000 needed the same outcomes within noise, 3,600 about 8 %
    more. Validity does not depend on it."""
    share = config.canary_percent / 100
    t_canary = float(config.min_feedback)
    return t_canary, 10 * t_canary * (1 - share) / share


def figures_of(config: RolloutConfig, canary: Arm, stable: Arm, hours: float) -> dict[str, Any]:
    """What a look sees: each arm's counts, the difference, its one-sided bounds (``interval``:
    each end at ``confidence``), the two tests' least log evidence at ``−max_drop``
    (``evidence``, promotion's and roll-back's, to within 10⁻³ below) and which of them
    reach ``threshold`` = ``log(1/(1 − confidence))`` (``decisive``: the search stops as
    soon as it is sure either way)."""
    alpha = 1 - config.confidence
    t_canary, t_stable = tuning(config)
    lo, hi = one_sided_bounds(canary, stable, alpha, t_canary, t_stable)
    both = bool(canary.n and stable.n)
    diff = None if not both else canary.correct / canary.n - stable.correct / stable.n
    evidence = decisive = None
    if both:
        threshold = math.log(1 / alpha)
        c_canary, c_stable = prior_size(t_canary, alpha), prior_size(t_stable, alpha)
        sides = {"promote": True, "roll_back": False}
        evidence = {
            side: _finite(one_sided_evidence(canary, stable, -config.max_drop, c_canary, c_stable, above))
            for side, above in sides.items()
        }
        decisive = [
            side
            for side, above in sides.items()
            if one_sided_evidence(canary, stable, -config.max_drop, c_canary, c_stable, above, threshold) >= threshold
        ]
    return {
        "canary": {"n": canary.n, "correct": canary.correct},
        "stable": {"n": stable.n, "correct": stable.correct},
        "difference": diff,
        "interval": [lo, hi],
        "bounds": BOUNDS,
        "evidence": evidence,
        "decisive": decisive,
        "threshold": math.log(1 / alpha),
        "confidence": config.confidence,
        "max_drop": config.max_drop,
        "min_feedback": config.min_feedback,
        "hours": round(hours, 6),
        "method": METHOD,
    }


def _finite(value: float) -> float:
    """JSON has no infinity: the evidence is stored clipped to ±1e300 (−inf: none at all)."""
    return max(-1e300, min(1e300, value))


def decide(config: RolloutConfig, canary: Arm, stable: Arm, hours: float) -> Decision:
    """The step a look takes: PROMOTED, ROLLED_BACK, UNDECIDED, or CANARY (hold)."""
    figures = figures_of(config, canary, stable, hours)
    decisive = figures["decisive"] or []
    enough = canary.n >= config.min_feedback and stable.n >= config.min_feedback
    said = explain(figures)
    if enough and "promote" in decisive:
        return Decision(RolloutStatus.PROMOTED, figures, f"{said}: non-inferior, promoted")
    if enough and "roll_back" in decisive:
        return Decision(RolloutStatus.ROLLED_BACK, figures, f"{said}: inferior, rolled back to the stable version")
    if hours >= config.max_hours:
        why = "neither shown" if enough else f"fewer than {config.min_feedback:,} outcomes per version"
        return Decision(
            RolloutStatus.UNDECIDED,
            figures,
            f"{said}: undecided after {_num(config.max_hours)} h ({why}); the stable version serves",
        )
    return Decision(RolloutStatus.CANARY, figures, said)


def explain(figures: dict[str, Any]) -> str:
    """One line: each arm, the difference and its bounds against −max_drop, in points (each
    bound one-sided at the confidence; figures stored before the one-sided tests say nothing
    of ``bounds`` and were a two-sided interval)."""
    c, s = figures["canary"], figures["stable"]
    lo, hi = figures["interval"]
    diff = figures["difference"]
    shown = "n/a" if diff is None else f"{diff * 100:+.1f} points"
    return (
        f"canary {_arm(c)} vs stable {_arm(s)}: difference {shown}, "
        f"{_shown_bounds(figures)} [{lo * 100:+.1f}, {hi * 100:+.1f}] points against −{_num(figures['max_drop'] * 100)}"
    )


def _shown_bounds(figures: Mapping[str, Any]) -> str:
    level = _num(figures["confidence"] * 100)
    if figures.get("bounds") == BOUNDS:
        return f"always-valid bounds (each one-sided at {level} %)"
    return f"{level} % always-valid interval"


def _arm(arm: Mapping[str, int]) -> str:
    if not arm["n"]:
        return "0/0"
    return f"{arm['correct']:,}/{arm['n']:,} ({arm['correct'] / arm['n'] * 100:.1f} %)"
