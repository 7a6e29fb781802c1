"""The gate config's price table (``prices:``): parsed as exact Decimals, every wrong value a
SpecError naming the file and the field, described for the plan, and planned as changes
compared by value (no database)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gate import gateconfig
from gate.calls.prices import CHANGE_TEXT, describe_price, money, parse_prices, price_changes
from gate.errors import SpecError
from gate.prompt.yaml_file import parse_yaml
from gate.records import Price


def price(model: str, i: str, o: str) -> Price:
    return Price(model, Decimal(i), Decimal(o))


def test_prices_parse_from_yaml_as_exact_decimals():
    data = parse_yaml(
        "prices:\n  gpt-4o-mini: {input: 0.15, output: 0.60}\n"
        "  claude-3.5-haiku@2024: {input: 1, output: '4.000'}\n"
        "  local/free: {input: 0, output: 0.000000001}\n"
        "  big: {input: 1000000, output: 2.5e-1}\n",
        "gate.yaml",
    )
    prices = parse_prices(data["prices"], "gate.yaml")
    assert prices == {
        "gpt-4o-mini": price("gpt-4o-mini", "0.15", "0.6"),
        "claude-3.5-haiku@2024": price("claude-3.5-haiku@2024", "1", "4"),
        "local/free": price("local/free", "0", "0.000000001"),
        "big": price("big", "1000000", "0.25"),
    }
    # exact: the YAML float's text, never its binary value (0.15 is not 0.1499999999999999944...)
    assert str(prices["gpt-4o-mini"].input_per_million) == "0.15"
    assert prices["local/free"].output_per_million.as_tuple() == (0, (1,), -9)
    assert all(isinstance(v, Decimal) for p in prices.values() for v in (p.input_per_million, p.output_per_million))


def test_no_prices_section_is_no_prices():
    assert parse_prices(None) == {} and parse_prices({}) == {}


def test_the_gate_config_carries_its_prices(tmp_path):
    cfg = gateconfig.parse_config(
        {"prices": {"m1": {"input": 0.5, "output": 1.5}}}, file="gate.yaml", base_dir=tmp_path
    )
    assert cfg.prices == {"m1": price("m1", "0.5", "1.5")}
    assert gateconfig.parse_config({}, file="gate.yaml").prices == {}
    assert "prices" in gateconfig.TOP_FIELDS


@pytest.mark.parametrize(
    "raw, field, reason",
    [
        ([1, 2], "prices", "must be a mapping of model →"),
        ({"m": 0.15}, "prices.m", "must be a mapping with input and output"),
        ({"m": {"input": 1}}, "prices.m.output", "is required"),
        ({"m": {"output": 1}}, "prices.m.input", "is required"),
        ({"m": {"input": None, "output": 1}}, "prices.m.input", "is required"),
        (
            {"m": {"input": 1, "output": 1, "cached": 0.5}},
            "prices.m.cached",
            "unknown field; a price has input, output",
        ),
        ({"m": {"input": "cheap", "output": 1}}, "prices.m.input", "'cheap' is not a number of US dollars"),
        ({"m": {"input": "1_000", "output": 1}}, "prices.m.input", "is not a number"),
        ({"m": {"input": "NaN", "output": 1}}, "prices.m.input", "'NaN' is not a number"),
        ({"m": {"input": "Infinity", "output": 1}}, "prices.m.input", "is not a number"),
        ({"m": {"input": True, "output": 1}}, "prices.m.input", "a bool is not a number"),
        ({"m": {"input": [1], "output": 1}}, "prices.m.input", "a list is not a number"),
        ({"m": {"input": {"usd": 1}, "output": 1}}, "prices.m.input", "a dict is not a number"),
        ({"m": {"input": 1, "output": -0.01}}, "prices.m.output", "-0.01 is out of range: 0 to 1,000,000"),
        ({"m": {"input": "-1", "output": 1}}, "prices.m.input", "-1 is out of range"),
        ({"m": {"input": float("nan"), "output": 1}}, "prices.m.input", "nan is not a finite number"),
        ({"m": {"input": float("inf"), "output": 1}}, "prices.m.input", "inf is not a finite number"),
        ({"m": {"input": float("-inf"), "output": 1}}, "prices.m.input", "-inf is not a finite number"),
        ({"m": {"input": 1000000.01, "output": 1}}, "prices.m.input", "1000000.01 is out of range"),
        ({"m": {"input": 10**7, "output": 1}}, "prices.m.input", "10000000 is out of range"),
        ({"m": {"input": 10**5000, "output": 1}}, "prices.m.input", "is out of range"),
        ({"m": {"input": "1e999999999999999999", "output": 1}}, "prices.m.input", "is out of range"),
        ({"m": {"input": 0.0000000001, "output": 1}}, "prices.m.input", "has more than 9 decimal places"),
        ({"m": {"input": "0.1234567891", "output": 1}}, "prices.m.input", "has more than 9 decimal places"),
        ({"m": {"input": "1e-999999999999999999", "output": 1}}, "prices.m.input", "has more than 9 decimal places"),
        ({"": {"input": 1, "output": 1}}, "prices.", "is not a model name"),
        ({"m" * 129: {"input": 1, "output": 1}}, "prices." + "m" * 40, "at most 128 characters"),
        ({"gpt 4o": {"input": 1, "output": 1}}, "prices.gpt 4o", "is not a model name"),
        ({"bad\x1b[2J": {"input": 1, "output": 1}}, "prices.bad\x1b[2J", "is not a model name"),
        ({4: {"input": 1, "output": 1}}, "prices.4", "is not a model name"),
        ({None: {"input": 1, "output": 1}}, "prices.None", "is not a model name"),
    ],
)
def test_every_wrong_price_names_its_field(raw, field, reason):
    with pytest.raises(SpecError) as err:
        parse_prices(raw, "gate.yaml")
    assert (err.value.file, err.value.field) == ("gate.yaml", field)
    assert reason in err.value.reason


def test_a_price_of_128_characters_and_nine_decimals_is_fine():
    name = "m" * 128
    got = parse_prices({name: {"input": "0.123456789", "output": "0.1500000000000"}})
    assert got[name] == price(name, "0.123456789", "0.15")


def test_at_most_a_thousand_models():
    raw = {f"m{i}": {"input": 1, "output": 1} for i in range(1001)}
    with pytest.raises(SpecError) as err:
        parse_prices(raw, "gate.yaml")
    assert (err.value.field, err.value.reason) == ("prices", "declares 1001 models: at most 1000")
    del raw["m0"]
    assert len(parse_prices(raw, "gate.yaml")) == 1000


def test_a_wrong_price_in_a_gate_config_is_a_spec_error_of_that_file(tmp_path):
    with pytest.raises(SpecError) as err:
        gateconfig.parse_config({"prices": {"m": {"input": -1, "output": 1}}}, file="gate.yaml", base_dir=tmp_path)
    assert str(err.value) == "gate.yaml: prices.m.input: -1 is out of range: 0 to 1,000,000 dollars per 1M tokens"
    with pytest.raises(SpecError) as err:
        gateconfig.parse_config({"price": {}}, file="gate.yaml")
    assert "known fields are providers, prices, datasets, prompts" in str(err.value)


def test_describe_shows_cents_and_every_decimal_there_is():
    assert describe_price(price("m", "0.15", "0.6")) == "$0.15 in / $0.60 out per 1M tokens"
    assert describe_price(price("m", "3", "0.000125")) == "$3.00 in / $0.000125 out per 1M tokens"
    assert describe_price(price("m", "1000000", "0")) == "$1000000.00 in / $0.00 out per 1M tokens"
    assert money(Decimal("0.150")) == "$0.15" and money(Decimal("2.5")) == "$2.50"


def test_price_changes_are_added_changed_and_removed_by_value():
    registered = {"a": price("a", "0.150", "0.60"), "b": price("b", "1", "2"), "c": price("c", "5", "5")}
    declared = {"a": price("a", "0.15", "0.6"), "b": price("b", "1", "2.5"), "d": price("d", "0.1", "0.2")}
    assert price_changes(registered, declared) == [
        ("price-changed", "b", "$1.00 in / $2.00 out per 1M tokens", "$1.00 in / $2.50 out per 1M tokens", ("b",)),
        ("price-added", "d", None, "$0.10 in / $0.20 out per 1M tokens", ("d",)),
        ("price-removed", "c", "$5.00 in / $5.00 out per 1M tokens", None, ("c",)),
    ]
    assert price_changes(declared, declared) == [] and price_changes({}, {}) == []


def test_price_changes_read_as_gate_config_changes():
    assert set(CHANGE_TEXT) <= set(gateconfig.CHANGE_TEXT)
    lines = [
        str(gateconfig.Change(*c))
        for c in price_changes(
            {"old": price("old", "1", "1"), "x": price("x", "0.15", "0.6")},
            {"new": price("new", "0.15", "0.6"), "x": price("x", "0.2", "0.6")},
        )
    ]
    assert lines == [
        "price new: new, $0.15 in / $0.60 out per 1M tokens",
        "price x: $0.15 in / $0.60 out per 1M tokens → $0.20 in / $0.60 out per 1M tokens",
        "price old: removed (was $1.00 in / $1.00 out per 1M tokens)",
    ]


def test_a_calls_most_output_is_the_larger_of_its_two_limits():
    """Review: a prompt may set both max_tokens and max_completion_tokens; providers that
    honour max_completion_tokens first (vLLM: ``max_completion_tokens or max_tokens``; the
    reasoning models) let a call answer up to the larger, so a cost cap's bound must be it.
    ``max_tokens: 1, max_completion_tokens: 16384`` was bounded at 1 output token."""
    from gate.calls.spend_caps import output_bound

    assert output_bound({"max_tokens": 1, "max_completion_tokens": 16384}) == 16384
    assert output_bound({"max_completion_tokens": 7, "max_tokens": 300}) == 300
    assert output_bound({"max_tokens": 5}) == 5 and output_bound({"max_completion_tokens": 9}) == 9
    assert output_bound({}) is None and output_bound(None) is None
