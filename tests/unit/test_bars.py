"""Declaring a mapping's bars (``gate.verdict.bars.Bars``): what ``parse`` accepts, the one-line
message of every value it refuses, and the JSON (``extra``) and phrases (``describe``) it
gives back."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from gate.errors import UsageError
from gate.verdict.bar_checks import check
from gate.verdict.bars import EXTRA_KEYS, MAX_LABEL_BARS, Bars

ALL = {
    "max_broken": 0,
    "min_recall": {"urgent": 0.9, "normal": "0.5"},
    "min_precision": {"urgent": "0.95"},
    "max_latency_p95_ms": "250",
    "max_cost_per_1k_items": 0.1,
}


def test_accuracy_alone_has_no_extra_bars():
    bars = Bars.parse("0.9")
    assert bars == Bars(Decimal("0.9")) and bars.extra() is None and bars.describe() == []
    assert Bars.parse("0.9", {}) == Bars.parse("0.9", None) == bars
    assert Bars.parse("0.9", {key: None for key in EXTRA_KEYS}) == bars  # null: not declared


def test_every_bar_parses_to_its_type():
    bars = Bars.parse(0.9, ALL)
    assert bars.min_accuracy == Decimal("0.9")
    assert bars.max_broken == 0 and bars.max_latency_p95_ms == 250
    assert bars.min_recall == {"urgent": Decimal("0.9"), "normal": Decimal("0.5")}
    assert bars.min_precision == {"urgent": Decimal("0.95")}
    assert bars.max_cost_per_1k_items == Decimal("0.1")


def test_extra_is_json_and_parses_back_to_the_same_bars():
    bars = Bars.parse("0.9", ALL)
    extra = bars.extra()
    assert extra == {
        "max_broken": 0,
        "min_recall": {"normal": "0.5", "urgent": "0.9"},
        "min_precision": {"urgent": "0.95"},
        "max_latency_p95_ms": 250,
        "max_cost_per_1k_items": "0.1",
    }
    assert Bars.parse("0.9", extra) == bars
    assert Bars.parse("0.9", {"max_broken": 3}).extra() == {"max_broken": 3}


def test_equal_values_are_equal_bars():
    """0.90 and 0.9 are one bar: a plan must not see a change between them."""
    assert Bars.parse("0.90", {"min_recall": {"a": "0.50"}, "max_cost_per_1k_items": "0.10"}) == Bars.parse(
        "0.9", {"min_recall": {"a": 0.5}, "max_cost_per_1k_items": 0.1}
    )


def test_describe_gives_one_phrase_per_bar():
    assert Bars.parse("0.9", ALL).describe() == [
        "max broken 0",
        "recall[normal] ≥ 50%",
        "recall[urgent] ≥ 90%",
        "precision[urgent] ≥ 95%",
        "p95 latency ≤ 250 ms",
        "cost ≤ $0.1 per 1k items",
    ]


def test_whole_numbers_accept_spaces_and_the_limit():
    assert Bars.parse("0.9", {"max_broken": " 7 ", "max_latency_p95_ms": 10**9}) == Bars(
        Decimal("0.9"), max_broken=7, max_latency_p95_ms=10**9
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"max_brokn": 0}, "unknown bar 'max_brokn': use min_accuracy, max_broken, min_recall"),
        ({"max_broken": -1}, "max_broken -1 is not a whole number ≥ 0"),
        ({"max_broken": 1.5}, "max_broken 1.5 is not a whole number ≥ 0"),
        ({"max_broken": True}, "max_broken True is not a whole number ≥ 0"),
        ({"max_broken": "two"}, "max_broken 'two' is not a whole number ≥ 0"),
        ({"max_broken": 10**9 + 1}, "max_broken 1000000001 is out of range: at most 1000000000"),
        ({"max_latency_p95_ms": "250ms"}, "max_latency_p95_ms '250ms' is not a whole number ≥ 0"),
        ({"max_latency_p95_ms": [250]}, "max_latency_p95_ms [250] is not a whole number ≥ 0"),
        ({"max_cost_per_1k_items": "$1"}, "max_cost_per_1k_items '$1' is not a number of US dollars"),
        ({"max_cost_per_1k_items": -0.5}, "max_cost_per_1k_items -0.5 is out of range"),
        ({"max_cost_per_1k_items": "NaN"}, "max_cost_per_1k_items 'NaN' is out of range"),
        ({"max_cost_per_1k_items": "Infinity"}, "max_cost_per_1k_items 'Infinity' is out of range"),
        ({"max_cost_per_1k_items": "1e10"}, "max_cost_per_1k_items '1e10' is out of range"),
        ({"max_cost_per_1k_items": "0.0000000001"}, "at most 9 decimals"),
        ({"min_recall": 0.9}, "min_recall must map a label to a fraction, e.g. {urgent: 0.9}"),
        ({"min_precision": ["urgent", 0.9]}, "min_precision must map a label to a fraction"),
        ({"min_recall": {"": 0.9}}, "min_recall: a label must be a non-empty string of at most 128 characters"),
        ({"min_recall": {1: 0.9}}, "min_recall: a label must be a non-empty string"),
        ({"min_precision": {"x" * 129: 0.9}}, "min_precision: a label must be a non-empty string"),
        ({"min_recall": {"urgent": 1.5}}, "min_recall[urgent] 1.5 is outside [0, 1]"),
        ({"min_precision": {"urgent": "most"}}, "min_precision[urgent] 'most' is not a number"),
        ({"min_recall": {f"l{i}": 0.5 for i in range(MAX_LABEL_BARS + 1)}}, "min_recall names 65 labels: at most 64"),
    ],
)
def test_each_bad_bar_is_one_line_naming_it(extra, message):
    with pytest.raises(UsageError) as raised:
        Bars.parse("0.9", extra)
    assert message in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize("bar", ["1.5", "-0.1", "abc", "90"])
def test_a_bad_min_accuracy_is_refused_as_before(bar):
    with pytest.raises(UsageError, match="min accuracy"):
        Bars.parse(bar, {"max_broken": 0})


def test_a_hostile_label_is_cut_in_the_message():
    with pytest.raises(UsageError) as raised:
        Bars.parse("0.9", {"min_recall": {"x" * 100: 2}})
    assert str(raised.value).startswith(f"min_recall[{'x' * 60}] 2 ")


# --- max_drop: the non-inferiority bar against live ------------------------------------------


def test_max_drop_confidence_and_early_stop_parse_and_round_trip():
    bars = Bars.parse("0.9", {"max_drop": 2, "confidence": "0.9", "early_stop": False})
    assert bars.max_drop == Decimal("2") and bars.confidence == Decimal("0.9") and bars.early_stop is False
    assert bars.extra() == {"max_drop": "2", "confidence": "0.9", "early_stop": False}
    assert Bars.parse("0.9", bars.extra()) == bars
    assert bars.describe() == ["max drop 2 pts", "confidence 90%", "early stop off"]
    defaults = Bars.parse("0.9", {"max_drop": "1.5"})
    assert defaults.confidence == Decimal("0.95") and defaults.early_stop is True
    assert defaults.extra() == {"max_drop": "1.5"}  # defaults are not written


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"max_drop": -1}, "max_drop -1 is out of range"),
        ({"max_drop": 101}, "max_drop 101 is out of range"),
        ({"max_drop": "two"}, "max_drop 'two' is not a number of accuracy points"),
        ({"max_drop": True}, "max_drop True is out of range"),
        ({"confidence": "0.4"}, "confidence '0.4' is out of range"),
        ({"confidence": 1}, "confidence 1 is out of range"),
        ({"confidence": 95}, "confidence 95 is outside [0, 1]"),
        ({"early_stop": "no"}, "early_stop 'no' is not true or false"),
    ],
)
def test_max_drop_and_its_settings_refuse_in_one_line(extra, message):
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Bars.parse("0.9", extra)


def _drop(fixed, broken, both_right, both_wrong, max_drop="2", **extra):
    flips = {
        "fixed": fixed,
        "broken": broken,
        "both_right": both_right,
        "both_wrong": both_wrong,
        "paired": fixed + broken + both_right + both_wrong,
    }
    return [
        c for c in check(Bars.parse("0", {"max_drop": max_drop, **extra}), {"matches": 0, "scored": 1, "flips": flips})
    ][-1]


def test_max_drop_passes_misses_or_is_inconclusive_by_the_interval():
    """One point worse than live: on 200 items the interval straddles −2 (inconclusive), on
    5,000 items with the same rates it lies above it (pass); five points worse on 5,000 lies
    wholly below it (missed)."""
    small = _drop(6, 8, 174, 12)  # −1.0 pts on 200
    assert small.state == "fail" and small.reason == "inconclusive" and small.conclusive is False
    assert small.value.startswith("\u22121.0 pts [\u2212")
    low = small.value.split("[")[1].split(",")[0]
    assert small.note == f"inconclusive: the difference could be as low as {low} pts; the limit is \u22122"
    large = _drop(150, 200, 4350, 300)  # −1.0 pts on 5,000
    assert large.state == "pass" and large.conclusive is True and large.reason is None
    assert large.value == "\u22121.0 pts [\u22121.7, \u22120.3]"
    worse = _drop(50, 300, 4350, 300)
    assert (worse.state, worse.reason, worse.conclusive) == ("fail", "missed", True)
    assert worse.to_dict()["interval"] == pytest.approx(list(worse.interval)) and worse.to_dict()["reason"] == "missed"


def test_max_drop_boundary_is_exact_and_printed_on_its_side():
    """A lower limit a hair below −2 points fails, and is printed with the digits that show
    it below (never "−2.0" against a limit of −2)."""
    from gate.verdict.bar_checks import points

    bound = -Fraction(2, 100)
    assert points(-0.0200001, bound) == "\u22122.00001" and points(-0.0199, bound) == "\u22122.0"
    assert points(-0.020001, None) == "\u22122.0" and points(-0.0201, bound) == "\u22122.01"
    assert points(0.0) == "0.0" and points(0.009) == "+0.9" and points(-0.0004) == "0.0"


def test_max_drop_is_na_pending_or_failed_like_max_broken():
    bars = Bars.parse("0", {"max_drop": "2"})
    assert check(bars, {})[-1].state == "pending"
    assert check(bars, {"flips": None, "baseline_note": "no live version yet"})[-1].state == "n/a"
    failed = check(bars, {"flips": None, "baseline_error": "the live version's answers are incomplete"})[-1]
    assert failed.state == "fail" and failed.note == "the live version's answers are incomplete"
