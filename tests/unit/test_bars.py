"""Declaring a mapping's bars (``gate.bars.Bars``): what ``parse`` accepts, the one-line
message of every value it refuses, and the JSON (``extra``) and phrases (``describe``) it
gives back."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gate.bars import EXTRA_KEYS, MAX_LABEL_BARS, Bars
from gate.errors import UsageError

ALL = {"max_broken": 0, "min_recall": {"urgent": 0.9, "normal": "0.5"}, "min_precision": {"urgent": "0.95"},
       "max_latency_p95_ms": "250", "max_cost_per_1k_items": 0.1}


def test_accuracy_alone_has_no_extra_bars():
    bars = Bars.parse("0.9")
    assert bars == Bars(Decimal("0.9")) and bars.extra() is None and bars.describe() == []
    assert Bars.parse("0.9", {}) == Bars.parse("0.9", None) == bars
    assert Bars.parse("0.9", {key: None for key in EXTRA_KEYS}) == bars     # null: not declared


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
    assert extra == {"max_broken": 0, "min_recall": {"normal": "0.5", "urgent": "0.9"},
                     "min_precision": {"urgent": "0.95"}, "max_latency_p95_ms": 250, "max_cost_per_1k_items": "0.1"}
    assert Bars.parse("0.9", extra) == bars
    assert Bars.parse("0.9", {"max_broken": 3}).extra() == {"max_broken": 3}


def test_equal_values_are_equal_bars():
    """0.90 and 0.9 are one bar: a plan must not see a change between them."""
    assert Bars.parse("0.90", {"min_recall": {"a": "0.50"}, "max_cost_per_1k_items": "0.10"}) == \
        Bars.parse("0.9", {"min_recall": {"a": 0.5}, "max_cost_per_1k_items": 0.1})


def test_describe_gives_one_phrase_per_bar():
    assert Bars.parse("0.9", ALL).describe() == [
        "max broken 0", "recall[normal] ≥ 50%", "recall[urgent] ≥ 90%", "precision[urgent] ≥ 95%",
        "p95 latency ≤ 250 ms", "cost ≤ $0.1 per 1k items"]


def test_whole_numbers_accept_spaces_and_the_limit():
    assert Bars.parse("0.9", {"max_broken": " 7 ", "max_latency_p95_ms": 10 ** 9}) == \
        Bars(Decimal("0.9"), max_broken=7, max_latency_p95_ms=10 ** 9)


@pytest.mark.parametrize("extra, message", [
    ({"max_brokn": 0}, "unknown bar 'max_brokn': use min_accuracy, max_broken, min_recall"),
    ({"max_broken": -1}, "max_broken -1 is not a whole number ≥ 0"),
    ({"max_broken": 1.5}, "max_broken 1.5 is not a whole number ≥ 0"),
    ({"max_broken": True}, "max_broken True is not a whole number ≥ 0"),
    ({"max_broken": "two"}, "max_broken 'two' is not a whole number ≥ 0"),
    ({"max_broken": 10 ** 9 + 1}, "max_broken 1000000001 is out of range: at most 1000000000"),
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
])
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
