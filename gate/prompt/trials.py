"""Trials: a prompt may ask for each item to be called ``trials`` times (a model at
temperature > 0 does not answer the same way twice) and say which rule turns the trials
into the item's one verdict:

* ``majority``: more than half of the trials answer the expected label;
* ``all``: every trial does;
* ``k_of_n``: at least ``k`` of them do.

A trial whose call failed (no answer) counts as not matching; an item whose every trial
failed is ERROR, as an item with one call is. The item is still the unit of every figure
(accuracy, its interval, flips, McNemar): one verdict per item, never N samples.

The item keeps one decision, the one the verdict stands on, so the confusion matrix and
the per-label metrics agree with the accuracy: the expected label when the rule held, else
the most frequent wrong answer (``(error)`` when the only wrong trials are failed calls).
Among equally frequent answers the first in string order wins: the decision depends on the
multiset of answers alone, not on the order the calls came back in. An item is *unstable* when
its answered trials do not all give the same decision.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gate.records import Trial
from gate.states import Verdict

TRIAL_RULES = ("majority", "all", "k_of_n")
DEFAULT_RULE = "majority"
MAX_TRIALS = 20
ERROR_ANSWER = "(error)"  # the decision of an item whose only wrong trials are failed calls


@dataclass(frozen=True)
class TrialRule:
    """How many trials an item gets and how many must match for a MATCH."""

    trials: int = 1
    rule: str = DEFAULT_RULE
    k: int | None = None

    @property
    def needed(self) -> int:
        if self.rule == "all":
            return self.trials
        if self.rule == "k_of_n":
            return int(self.k or self.trials)
        return self.trials // 2 + 1

    def pinned(self) -> dict:
        """What a run pins of it (gate.prompt.request_keys.pin), and what reports read back."""
        return {"n": self.trials, "rule": self.rule, "k": self.k, "needed": self.needed}


@dataclass(frozen=True)
class Outcome:
    verdict: str  # MATCH, MISMATCH or ERROR
    decision: str | None  # None for ERROR
    unstable: bool
    error: str | None = None


def judge(
    trials: Sequence[Trial], expected: str, rule: TrialRule, matches: Callable[[str], bool] | None = None
) -> Outcome:
    """The item's verdict, decision and stability from its trials. ``matches`` says whether
    a decision matches the expected one (default: equal to it; a fields decision compares
    field by field, and its MATCH keeps the most frequent matching answer)."""
    answered = [t.decision for t in trials if t.error is None and t.decision is not None]
    if not answered:
        first = next((t.error for t in trials if t.error), "no trial was answered")
        return Outcome(Verdict.ERROR, None, False, first)
    unstable = len(set(answered)) > 1
    right = [d for d in answered if (d == expected if matches is None else matches(d))]
    if len(right) >= rule.needed:
        return Outcome(Verdict.MATCH, expected if matches is None else most_frequent(right), unstable)
    wrong = [d for d in answered if d not in right]
    return Outcome(Verdict.MISMATCH, most_frequent(wrong) if wrong else ERROR_ANSWER, unstable)


def most_frequent(answers: Sequence[str]) -> str:
    """The most frequent answer; among equals, the first in string order."""
    counts = Counter(answers)
    return min(counts, key=lambda a: (-counts[a], a))


def answers_shown(trials: Sequence[dict]) -> list[str]:
    """Each trial's answer as a report lists it (stored form, ``Trial.to_dict``)."""
    return [ERROR_ANSWER if t.get("error") or t.get("decision") is None else str(t["decision"]) for t in trials]
