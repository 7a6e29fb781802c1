"""Answers decided field by field (gate/prompt/structured): each comparator at its edges, the
reading of an answer (not an object, missing fields, bounds), the rule's parsing, and the
masks an item keeps."""

from __future__ import annotations

import json
import time

import pytest

from gate.errors import SpecError
from gate.kinds import rule_of
from gate.prompt.spec import parse_spec
from gate.prompt.structured.compare import field_matches, same_value, score, to_decimal
from gate.prompt.structured.reading import MAX_READ_CHARS, NOT_AN_OBJECT, parse_read, read_answer
from gate.prompt.structured.rule import MAX_FIELDS, FieldSpec, parse_fields

NUMBER = FieldSpec("amount", "number")


def number(tolerance=None, relative=None) -> FieldSpec:
    from decimal import Decimal

    return FieldSpec(
        "amount",
        "number",
        tolerance=None if tolerance is None else Decimal(tolerance),
        relative=None if relative is None else Decimal(relative),
    )


# --- number: tolerances at their edges ---------------------------------------------------------


@pytest.mark.parametrize(
    "spec, actual, expected, match",
    [
        (NUMBER, 12.5, 12.5, True),
        (NUMBER, 12.5, "12.50", True),  # a numeric string reads as its number
        (NUMBER, 12, 12.0, True),
        (NUMBER, 12.49, 12.5, False),  # exact by default
        (number("0.01"), 12.49, 12.50, True),  # exactly at the absolute tolerance: inside
        (number("0.01"), 12.51, 12.50, True),
        (number("0.01"), 12.489, 12.50, False),  # just past it
        (number("0.01"), 12.511, 12.50, False),
        (number("0.1"), 1.1, 1.0, True),  # 1.1 - 1.0 is 0.10000000000000009 in floats: exact here
        (number("0.1"), 0.3, 0.2, True),
        (number(relative="0.01"), 101, 100, True),  # 1 % of the expected value, at the edge
        (number(relative="0.01"), 99, 100, True),
        (number(relative="0.01"), 101.01, 100, False),
        (number(relative="0.01"), -101, -100, True),  # relative to |expected|
        (number(relative="0.5"), 0.0001, 0, False),  # relative to 0 is exact
        (number("0.01", "0.5"), 0.01, 0, True),  # either tolerance suffices
        (number("1000"), True, 1, False),  # a boolean is no number
        (number("1000"), "12,50", 12.5, False),  # no decimal commas or thousands separators
        (number("1000"), "$12", 12, False),
        (number("1000"), "NaN", 1, False),
        (number("1000"), float("inf"), 1, False),
        (NUMBER, None, None, True),  # null expected: null answered
        (NUMBER, 0, None, False),
        (NUMBER, " 1e3 ", 1000, True),
        (NUMBER, "1" * 65, 1, False),  # over 64 characters: not read as a number
    ],
)
def test_number(spec, actual, expected, match):
    assert field_matches(spec, actual, expected) is match


def test_decimal_of_a_float_is_its_shortest_repr():
    assert to_decimal(0.1) == to_decimal("0.1") and to_decimal(1e-7) == to_decimal("1e-7")
    assert to_decimal(True) is None and to_decimal(float("nan")) is None and to_decimal("1.2.3") is None


# --- text: case, whitespace, Unicode -------------------------------------------------------------


@pytest.mark.parametrize(
    "form, actual, expected, match",
    [
        (None, "Jane  Doe", "jane doe", True),
        (None, " Jane\tDoe\n", "JANE DOE", True),
        (None, "Straße", "STRASSE", True),  # casefold: ß is ss
        (None, "Jane Doe", "Jane Dow", False),
        (None, "café", "cafe\u0301", False),  # composed and decomposed differ without normalisation
        ("NFC", "café", "cafe\u0301", True),
        ("NFKC", "Ｏｒｄｅｒ №①", "order No1", True),  # compatibility forms fold under NFKC
        ("NFC", "Ｏｒｄｅｒ ①", "order 1", False),  # ... not under NFC
        (None, "Ｏｒｄｅｒ", "order", False),
        (None, 42, "42", True),  # scalars compare as their JSON text
        (None, True, "true", True),
        (None, None, None, True),
        (None, ["a"], "a", False),
    ],
)
def test_text(form, actual, expected, match):
    assert field_matches(FieldSpec("name", "text", normalize=form), actual, expected) is match


# --- label: read as first_word reads an answer --------------------------------------------------

LABEL = FieldSpec("category", "label", labels=("billing", "shipping", "not eligible"))


@pytest.mark.parametrize(
    "actual, expected, match",
    [
        ("billing", "billing", True),
        ("**Billing.**", "billing", True),
        ("BILLING", "Billing", True),  # the expected value is read the same way
        ("billing issue", "billing", True),  # starts with the label
        ("Not-Eligible", "not eligible", True),  # separators interchangeable
        ("billings", "billing", False),  # a whole word
        ("other", "billing", False),
        ("billing", "nonsense", False),  # an expected value that names no label matches nothing
        (None, "billing", False),
    ],
)
def test_label(actual, expected, match):
    assert field_matches(LABEL, actual, expected) is match


# --- lists: as a set or ordered --------------------------------------------------------------------


@pytest.mark.parametrize(
    "ordered, items, actual, expected, match",
    [
        (False, "exact", ["a", "b"], ["b", "a"], True),
        (False, "exact", ["a", "b", "a"], ["b", "a"], True),  # a set: duplicates are one
        (False, "exact", ["a"], ["a", "b"], False),
        (True, "exact", ["a", "b"], ["b", "a"], False),
        (True, "exact", ["a", "b"], ["a", "b"], True),
        (False, "exact", [1, 2.0], [2, 1], True),  # numbers by value
        (False, "exact", ["1"], [1], False),  # text is not a number under exact
        (False, "exact", [True], [1], False),
        (False, "text", ["Red ", "BLUE"], ["blue", "red"], True),
        (True, "text", ["Red", "Blue"], ["blue", "red"], False),
        (False, "exact", [], [], True),
        (False, "exact", "a", ["a"], False),
        (False, "exact", [["a"]], [["a"]], False),  # nested lists are not compared
    ],
)
def test_list(ordered, items, actual, expected, match):
    assert field_matches(FieldSpec("tags", "list", ordered=ordered, items=items), actual, expected) is match


@pytest.mark.parametrize(
    "a, b, same",
    [
        ("A-1", "A-1", True),
        ("A-1", "a-1", False),
        (1, 1.0, True),
        (1, "1", False),
        (True, 1, False),
        (False, False, True),
        (None, None, True),
        (None, "", False),
        ([1, "a"], [1.0, "a"], True),
    ],
)
def test_exact(a, b, same):
    assert same_value(a, b) is same


# --- reading an answer ----------------------------------------------------------------------------

RULE = parse_fields(
    {
        "order_id": "exact",
        "category": {"type": "label", "labels": ["billing", "shipping"]},
        "amount": {"type": "number", "tolerance": "0.01"},
    }
)
EXPECTED = json.dumps({"order_id": "ORD-1", "category": "billing", "amount": 12.5})


@pytest.mark.parametrize(
    "raw, read",
    [
        (
            '{"order_id": "ORD-1", "category": "Billing!", "amount": 12.5, "extra": 1}',
            {"amount": 12.5, "category": "billing", "order_id": "ORD-1"},
        ),  # label canonical, others dropped
        (
            'Here you go:\n```json\n{"order_id": "ORD-1", "amount": "12.50"}\n```',
            {"amount": "12.50", "order_id": "ORD-1"},
        ),
        ('<think>{"order_id": "x"}</think>{"order_id": "ORD-1"}', {"order_id": "ORD-1"}),
        ('{"category": "refund"}', {"category": "refund"}),  # no label: kept as read
        ('{"order_id": "' + "x" * 5000 + '"}', {"order_id": {"(too long)": 5000}}),
        ('{"amount": NaN}', {"amount": {"(not a number)": "nan"}}),
    ],
)
def test_reading_keeps_the_declared_fields(raw, read):
    text = read_answer(RULE, raw)
    assert json.loads(text) == read and text == json.dumps(read, sort_keys=True, separators=(",", ":"))


@pytest.mark.parametrize("raw", ["billing", "", None, "[1, 2]", '"a string"', "{not json}", "[" * 100_000])
def test_an_answer_without_a_json_object(raw):
    assert read_answer(RULE, raw) == NOT_AN_OBJECT
    outcome = score(RULE, NOT_AN_OBJECT, EXPECTED)
    assert (outcome.match, outcome.wrong, outcome.missing) == (False, 0b111, 0b111)


def test_masks_name_the_wrong_and_the_missing_fields():
    # fields in name order: amount (bit 0), category (bit 1), order_id (bit 2)
    read = read_answer(RULE, '{"order_id": "ORD-1", "category": "shipping"}')
    outcome = score(RULE, read, EXPECTED)
    assert (outcome.match, outcome.wrong, outcome.missing) == (False, 0b011, 0b001)
    read = read_answer(RULE, '{"order_id": "ORD-1", "category": "billing", "amount": 12.49}')
    assert score(RULE, read, EXPECTED) == score(RULE, read, EXPECTED) and score(RULE, read, EXPECTED).match
    assert parse_read(NOT_AN_OBJECT) is None


def test_reading_is_bounded_in_size_and_time():
    fields = {f"f{i}": "text" for i in range(MAX_FIELDS)}
    rule = parse_fields(fields)
    answer = json.dumps({name: "é" * 999 for name in fields})
    started = time.perf_counter()
    text = read_answer(rule, answer)
    assert len(text) <= MAX_READ_CHARS and time.perf_counter() - started < 0.5
    deep = '{"f0": ' + "[" * 5000 + "]" * 5000 + "}"
    assert read_answer(rule, deep) in (NOT_AN_OBJECT, '{"f0":{"(unreadable)":true}}', '{"f0":{"(too long)":10000}}')
    huge_int = '{"f0": ' + "9" * 100_000 + "}"
    started = time.perf_counter()
    assert read_answer(rule, huge_int) == NOT_AN_OBJECT  # past the decoder's digits: no JSON
    assert time.perf_counter() - started < 0.5


# --- the rule in a prompt file -----------------------------------------------------------------------


def spec_with(decision, **extra):
    return parse_spec(
        {
            "name": "x",
            "model": "m",
            "messages": [{"role": "user", "content": "{{ item.text }}"}],
            "decision": decision,
            **extra,
        }
    )


def test_the_rule_round_trips_through_the_stored_config():
    spec = spec_with(
        {
            "type": "fields",
            "fields": {
                "b": "exact",
                "a": {"type": "number", "relative": 0.02},
                "c": {"type": "list", "ordered": True, "items": "text"},
            },
        }
    )
    assert spec.decision.fields.names == ("a", "b", "c")  # sorted: a field's bit is its place
    assert parse_spec(spec.to_config()) == spec and "labels" not in spec.to_config()
    assert rule_of(spec.to_config()["decision"]) == spec.decision.fields
    assert rule_of({"type": "first_word"}) is None


@pytest.mark.parametrize(
    "decision, extra, where, reason",
    [
        ({"type": "fields"}, {}, "decision.fields", "goes with type fields"),
        ({"type": "fields", "fields": {}}, {}, "decision.fields", "must map each field"),
        ({"type": "fields", "fields": {"a b": "exact"}}, {}, "decision.fields", "is not a field name"),
        ({"type": "fields", "fields": {"a": "fuzzy"}}, {}, "decision.fields.a.type", "must be one of"),
        (
            {"type": "fields", "fields": {"a": {"type": "number", "tolerance": -1}}},
            {},
            "decision.fields.a.tolerance",
            "out of range",
        ),
        (
            {"type": "fields", "fields": {"a": {"type": "number", "relative": 2}}},
            {},
            "decision.fields.a.relative",
            "out of range",
        ),
        (
            {"type": "fields", "fields": {"a": {"type": "number", "tolerance": "nan"}}},
            {},
            "decision.fields.a.tolerance",
            "out of range",
        ),
        (
            {"type": "fields", "fields": {"a": {"type": "label", "labels": ["x"]}}},
            {},
            "decision.fields.a.labels",
            "2 to 256 labels",
        ),
        (
            {"type": "fields", "fields": {"a": {"type": "label", "labels": ["x", "(none)"]}}},
            {},
            "decision.fields.a.labels",
            "reserved",
        ),
        (
            {"type": "fields", "fields": {"a": {"type": "text", "normalize": "NFX"}}},
            {},
            "decision.fields.a.normalize",
            "must be one of",
        ),
        (
            {"type": "fields", "fields": {"a": {"type": "exact", "tolerance": 1}}},
            {},
            "decision.fields.a.tolerance",
            "unknown option",
        ),
        (
            {"type": "fields", "fields": {f"f{i}": "exact" for i in range(MAX_FIELDS + 1)}},
            {},
            "decision.fields",
            "at most 32",
        ),
        ({"type": "fields", "fields": {"a": "exact"}}, {"labels": ["a", "b"]}, "labels", "no labels of its own"),
        ({"type": "json", "fields": {"a": "exact"}}, {}, "decision.fields", "goes with type fields"),
    ],
)
def test_a_rule_the_gate_refuses_names_the_field(decision, extra, where, reason):
    with pytest.raises(SpecError) as caught:
        spec_with(decision, **extra)
    assert caught.value.field == where and reason in caught.value.reason


# --- the item's result: one call, a reused answer, trials ---------------------------------------------


def test_an_items_result_keeps_the_masks_and_trials_judge_field_by_field():
    from types import SimpleNamespace

    from gate.prompt.trials import TrialRule
    from gate.records import Answer, ClaimedItem, Trial
    from workers.execute.results import called_result, reused_result, trials_result

    decision = spec_with(
        {"type": "fields", "fields": {"amount": {"type": "number", "tolerance": "0.01"}, "order_id": "exact"}}
    ).decision
    item = ClaimedItem(1, 0, "m1", {}, '{"amount":12.5,"order_id":"ORD-1"}', 1)
    near, far = '{"amount":12.49,"order_id":"ORD-1"}', '{"order_id":"ORD-1"}'
    out = SimpleNamespace(
        decision=near, raw_output="{}", output="{}", latency_ms=5, prompt_tokens=1, completion_tokens=1
    )
    result = called_result(item, out, "k", decision)
    assert (result.verdict, result.fields_wrong, result.fields_missing) == ("MATCH", 0, 0)
    again = reused_result(item, "k", Answer("k", far, "{}", 5, 1, 1, 9, 9), decision)
    assert (again.verdict, again.fields_wrong, again.fields_missing) == ("MISMATCH", 0b01, 0b01)

    def trials(*decisions):
        return [Trial(d, "{}", 5, 1, 1, key=f"k{i}") for i, d in enumerate(decisions)]

    majority = TrialRule(3, "majority")
    won = trials_result(item, majority, trials(far, near, '{"amount":12.5,"order_id":"ORD-1"}'), decision)
    assert won.verdict == "MATCH" and won.fields_wrong == 0  # 12.49 and 12.50 both match: 2 of 3
    lost = trials_result(item, majority, trials(far, far, near), decision)
    assert (lost.verdict, lost.actual_decision, lost.fields_wrong, lost.fields_missing) == ("MISMATCH", far, 1, 1)
    assert won.unstable and lost.unstable
