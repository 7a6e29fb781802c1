"""Early stop's rule (gate/verdict/early_stop.py) against a brute-force search over the remaining items:
a run it calls settled has no completion that clears its bars (it never stops a run that
could still pass), and a run no completion can clear is called settled (it stops as soon as
it may). The oracle judges the bars on its own, from the definitions (exact fractions, the
paired interval of gate.verdict.stats), not through gate.verdict.bar_checks."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest

from gate.verdict.bars import Bars
from gate.verdict.early_stop import Outcomes, best_case, explain, settled
from gate.verdict.stats import paired_difference_interval

LABELS = ("a", "b")
ANSWERS = ("a", "b", "(invalid)")


# --- the oracle: the bars of a finished run, from their definitions ----------------------------


def final_passes(bars: Bars, items: list[tuple[str, str | None, bool]]) -> bool:
    """Whether a finished run clears every bar early stop judges. ``items``: (expected,
    answer or None for an ERROR, live right?) for every item of the run."""
    scored = [(e, a, live) for e, a, live in items if a is not None]
    matches = sum(1 for e, a, _ in scored if a == e)
    if not scored or Fraction(matches, len(scored)) < Fraction(bars.min_accuracy):
        return False
    for label, bar in bars.min_recall.items():
        support = [a for e, a, _ in scored if e == label]
        if support and Fraction(sum(1 for a in support if a == label), len(support)) < Fraction(bar):
            return False
    for label, bar in bars.min_precision.items():
        answered = [e for e, a, _ in scored if a == label]
        if answered and Fraction(sum(1 for e in answered if e == label), len(answered)) < Fraction(bar):
            return False
    broken = sum(1 for e, a, live in scored if live and a != e)
    if bars.max_broken is not None and broken > bars.max_broken:
        return False
    if bars.max_drop is not None:
        both_right = sum(1 for e, a, live in scored if live and a == e)
        fixed = sum(1 for e, a, live in scored if not live and a == e)
        _, low, _ = paired_difference_interval(
            both_right, fixed, broken, len(scored) - both_right - fixed - broken, float(bars.confidence)
        )
        if Fraction(low) < -Fraction(bars.max_drop) / 100:
            return False
    return True


def outcomes_of(
    done: list[tuple[str, str | None, bool]], items: list[tuple[str, str | None, bool]], paired: bool
) -> Outcomes:
    """The tally of the items written so far (``done``), as the executor keeps it."""
    rows = {}
    for expected, answer, live in done:
        verdict = "ERROR" if answer is None else ("MATCH" if answer == expected else "MISMATCH")
        key = (verdict, expected, answer, ("MATCH" if live else "MISMATCH") if paired else "")
        rows[key] = rows.get(key, 0) + 1
    totals = {label: sum(1 for e, _, _ in items if e == label) for label in LABELS}
    live_right = sum(1 for _, _, live in items if live) if paired else None
    return Outcomes.from_rows([(*k, n) for k, n in rows.items()], len(items), totals, live_right)


def random_bars(rng: random.Random, paired: bool) -> Bars:
    extra = {}
    if rng.random() < 0.4:
        extra["min_recall"] = {rng.choice(LABELS): rng.choice(["0.5", "0.75", "1"])}
    if rng.random() < 0.4:
        extra["min_precision"] = {rng.choice(LABELS): rng.choice(["0.5", "0.8", "1"])}
    if paired and rng.random() < 0.5:
        extra["max_broken"] = rng.choice([0, 1, 2])
    if paired and rng.random() < 0.6:
        extra["max_drop"] = rng.choice(["0", "5", "10", "25"])
        extra["confidence"] = rng.choice(["0.8", "0.95"])
    return Bars.parse(rng.choice(["0", "0.5", "0.6", "0.75", "0.9", "1"]), extra)


def random_run(rng: random.Random, n: int) -> list[tuple[str, str | None, bool]]:
    """Items in the order they are answered: (expected, answer or None for ERROR, live right?)."""
    good = rng.random()
    out = []
    for _ in range(n):
        expected = rng.choice(LABELS)
        answer = None if rng.random() < 0.05 else (expected if rng.random() < good else rng.choice(ANSWERS))
        out.append((expected, answer, rng.random() < 0.7))
    return out


def completions(remaining: list[tuple[str, str | None, bool]]):
    """Every way the remaining items could be answered (their expected label and live's
    answer are fixed; an ERROR can only lose, so answers are the labels or none of them)."""
    for answers in itertools.product(ANSWERS, repeat=len(remaining)):
        yield [(e, a, live) for (e, _, live), a in zip(remaining, answers)]


@pytest.mark.parametrize("seed", range(6))
def test_a_settled_run_has_no_passing_completion_and_an_unsettled_one_has(seed):
    """Random runs of 3 to 9 items in random answer orders, random bars (accuracy, recall,
    precision, max_broken, max_drop at random confidences), judged after every prefix that
    leaves 1 to 5 items: settled ⇔ no completion of the rest clears the bars."""
    rng = random.Random(seed)
    cases = stops = 0
    for _ in range(600):
        paired = rng.random() < 0.6
        items = random_run(rng, rng.randint(3, 9))
        bars = random_bars(rng, paired)
        for k in range(max(0, len(items) - 5), len(items)):
            done, rest = items[:k], items[k:]
            could_pass = any(final_passes(bars, done + c) for c in completions(rest))
            stopped = bool(settled(bars, outcomes_of(done, items, paired)))
            assert not (stopped and could_pass), (bars, done, rest)  # never stops towards a pass
            assert stopped or could_pass, (bars, done, rest)  # stops as soon as it may
            cases, stops = cases + 1, stops + stopped
    assert cases > 2000 and stops > cases // 10  # not vacuous: thousands of cases, many of them stops


def test_larger_runs_against_the_best_and_the_worst_completion():
    """Runs of 40 to 400 items, judged after random prefixes: a settled run fails even when
    every remaining item is answered right (so every completion fails: that one is the
    best, as the module says and the exhaustive test above holds); one not settled passes
    in that completion."""
    rng = random.Random(7)
    for _ in range(300):
        paired = rng.random() < 0.6
        items = random_run(rng, rng.randint(40, 400))
        bars = random_bars(rng, paired)
        k = rng.randint(0, len(items) - 1)
        done, rest = items[:k], items[k:]
        best = done + [(e, e, live) for e, _, live in rest]
        assert bool(settled(bars, outcomes_of(done, items, paired))) == (not final_passes(bars, best))


def test_the_sentence_and_the_best_case():
    """1,000 items against a 90 % bar, 200 answered and 158 of them wrong: even if the other
    800 are right, 842 of 1,000 is 84.2 %."""
    rows = [("MATCH", "a", "a", "", 42), ("MISMATCH", "a", "b", "", 158)]
    outcomes = Outcomes.from_rows(rows, 1000, {"a": 1000})
    assert best_case(outcomes)["matches"] == 842 and best_case(outcomes)["scored"] == 1000
    missed = settled(Bars.parse("0.9"), outcomes)
    assert [c.name for c in missed] == ["min_accuracy"]
    assert explain(outcomes, missed) == (
        "stopped after 200 of 1,000 items: even if every remaining item "
        "matched, accuracy would be at most 84.2 % < 90 %"
    )
    assert settled(Bars.parse("0.84"), outcomes) == []  # 84.2 % can still clear 84 %
    assert settled(Bars.parse("0.9"), Outcomes.from_rows(rows, 200, {"a": 200})) == []  # nothing left to save


def test_recall_precision_broken_and_drop_in_words():
    rows = [("MISMATCH", "urgent", "routine", "MATCH", 30), ("MATCH", "routine", "routine", "MATCH", 20)]
    outcomes = Outcomes.from_rows(rows, 100, {"urgent": 50, "routine": 50}, live_right=100)
    bars = Bars.parse(
        "0", {"min_recall": {"urgent": "0.5"}, "min_precision": {"routine": "0.9"}, "max_broken": 10, "max_drop": "2"}
    )
    missed = {c.title: c for c in settled(bars, outcomes)}
    assert set(missed) == {"min_recall[urgent]", "min_precision[routine]", "max_broken", "max_drop"}
    sentence = explain(outcomes, list(missed.values()))
    assert "recall of urgent would be at most 40.0 % < 50 %" in sentence
    assert "precision of routine would be at most 62.5 % < 90 %" in sentence  # 50 of 80
    assert "30 items would still be broken > max_broken 10" in sentence
    assert "max_drop would be missed: the difference is at most" in sentence and "the limit is \u22122" in sentence


def test_an_unknown_live_or_label_count_is_never_judged_early():
    """Items with no live verdict (the live run is not finished) or label counts that do not
    add up leave those bars to the end."""
    rows = [("MISMATCH", "a", "b", "", 30)]
    outcomes = Outcomes.from_rows(rows, 100, {"a": 100}, live_right=None)
    assert settled(Bars.parse("0", {"max_broken": 0, "max_drop": "0"}), outcomes) == []
    partial = Outcomes.from_rows(rows, 100, {})
    assert settled(Bars.parse("0", {"min_recall": {"a": "0.9"}}), partial) == []
    assert [c.name for c in settled(Bars.parse("0.9", {}), partial)] == ["min_accuracy"]
