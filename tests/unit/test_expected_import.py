"""A dataset's expected objects as the import reads them (gate/prompt/structured/expected.py and
summary.py): the JSONL `expected` object and the CSV `expected.<field>` columns, each
problem one line naming the row and the field, the summary stored with the version, and a
fields rule held against it at submit. The file readers themselves, no database."""

from __future__ import annotations

import json

import pytest

from gate.datasets.sources import open_source, row_digests
from gate.errors import DatasetError, UsageError
from gate.prompt.structured.rule import parse_fields
from gate.prompt.structured.summary import ExpectedSummary, check_rule


def rows_of(path):
    reader = open_source(str(path))
    rows, cursor = [], None
    while True:
        page = reader.read_page(cursor, 100)
        rows += page.rows
        if page.next_cursor is None:
            return rows
        cursor = page.next_cursor


def summary_of(path):
    summary = ExpectedSummary("d")
    for row in rows_of(path):
        summary.add(row.item_id, row.position, row.expected, row.structured)
    return summary.to_json()


def jsonl(tmp_path, *records, name="d.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_jsonl_expected_object_is_kept_as_canonical_json_and_out_of_the_input(tmp_path):
    path = jsonl(
        tmp_path,
        {
            "item_id": "a",
            "expected": {"order_id": "ORD-1", "amount": 12.5, "tags": ["x"]},
            "text": "hello",
            "protected": True,
        },
        {"item_id": "b", "expected": {"tags": [], "amount": "7", "order_id": "ORD-2"}, "text": "bye"},
    )
    a, b = rows_of(path)
    assert a.structured and a.expected == '{"amount":12.5,"order_id":"ORD-1","tags":["x"]}'
    assert a.input == {"text": "hello"} and a.protected and not b.protected  # neither the answer nor the flag
    assert summary_of(path) == {
        "fields": {
            "amount": {"kinds": ["number", "string"], "numeric": True, "not_numeric": None, "values": {"7": 1}},
            "order_id": {
                "kinds": ["string"],
                "numeric": False,
                "not_numeric": '"ORD-1"',
                "values": {"ORD-1": 1, "ORD-2": 1},
            },
            "tags": {"kinds": ["list"], "numeric": False, "not_numeric": '["x"]', "values": {}},
        }
    }


def test_csv_expected_columns(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text(
        "item_id,expected.order_id,expected.amount,expected.tags,protected,text\n"
        'a,ORD-1, 12.50 ,"[""x"", ""y""]",true,hello\n'
        "b,ORD-2,7,[not json,no,bye\n"
    )
    a, b = rows_of(path)
    assert json.loads(a.expected) == {"order_id": "ORD-1", "amount": "12.50", "tags": ["x", "y"]}
    assert json.loads(b.expected)["tags"] == "[not json"  # not an array: text
    assert a.input == {"text": "hello"} and a.protected and not b.protected
    with pytest.raises(
        DatasetError,
        match=r"line 3: item b: expected field tags is not a list here and a list "
        r"at line 2",
    ):
        summary_of(path)


def test_a_csv_protected_column_flags_the_row_and_leaves_the_input(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("item_id,expected_decision,text,protected\na,yes,x,true\nb,no,y,\nc,no,z,FALSE\n")
    assert [(r.protected, r.input) for r in rows_of(path)] == [
        (True, {"text": "x"}),
        (False, {"text": "y"}),
        (False, {"text": "z"}),
    ]


def test_a_protected_row_hashes_apart_and_others_hash_as_before(tmp_path):
    plain = jsonl(tmp_path, {"item_id": "a", "expected_decision": "yes", "text": "x"}, name="p.jsonl")
    flagged = jsonl(
        tmp_path, {"item_id": "a", "expected_decision": "yes", "text": "x", "protected": True}, name="f.jsonl"
    )
    unflagged = jsonl(
        tmp_path, {"item_id": "a", "expected_decision": "yes", "text": "x", "protected": False}, name="u.jsonl"
    )
    digest = lambda p: row_digests(rows_of(p))[0]  # noqa: E731
    assert digest(plain) == digest(unflagged) != digest(flagged)


@pytest.mark.parametrize(
    "records, problem",
    [
        (
            [{"item_id": "a", "expected": {"x": 1, "y": 2}}, {"item_id": "b", "expected": {"x": 1}}],
            r"d: line 2: item b: expected field y is missing \(line 1 has it\)",
        ),
        (
            [{"item_id": "a", "expected": {"x": 1}}, {"item_id": "b", "expected": {"x": 1, "z": 2}}],
            r"line 2: item b: expected field z is not in line 1's expected object",
        ),
        (
            [{"item_id": "a", "expected_decision": "yes"}, {"item_id": "b", "expected": {"x": 1}}],
            r"line 2: item b: gives an expected object but line 1 gives a label",
        ),
        (
            [{"item_id": "a", "expected": {"x": ["a"]}}, {"item_id": "b", "expected": {"x": "a"}}],
            r"line 2: item b: expected field x is not a list here and a list at line 1",
        ),
    ],
)
def test_rows_that_disagree_are_refused_naming_both(tmp_path, records, problem):
    with pytest.raises(DatasetError, match=problem):
        summary_of(jsonl(tmp_path, *records))


@pytest.mark.parametrize(
    "expected, problem",
    [
        ({"x": {"a": 1}}, r"expected field x is an object"),
        ({"x": [["a"]]}, r"expected field x is a list holding lists or objects"),
        ({"x": [{"a": 1}]}, r"expected field x is a list holding lists or objects"),
        ({"x": "é" * 1001}, r"expected field x is 1001 characters long: at most 1000"),
        ({"a b": 1}, r"expected field 'a b' is not a field name"),
        ({f"f{i}": 1 for i in range(33)}, r"the expected object has 33 fields: at most 32"),
        ({}, r"the expected object has no field"),
    ],
)
def test_values_no_comparator_can_compare_are_refused(tmp_path, expected, problem):
    with pytest.raises(DatasetError, match=r"d.jsonl: line 1: item a: " + problem):
        rows_of(jsonl(tmp_path, {"item_id": "a", "expected": expected}))


def test_nan_in_an_expected_object_is_refused(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"item_id": "a", "expected": {"x": NaN}}\n')
    with pytest.raises(DatasetError, match=r"line 1: item a: expected field x is not a finite number"):
        rows_of(tmp_path / "d.jsonl")


@pytest.mark.parametrize("value", ["maybe", 2, "[]"])
def test_a_protected_column_is_true_or_false(tmp_path, value):
    with pytest.raises(DatasetError, match=r"line 1: item a: protected is .*: use true or false"):
        rows_of(jsonl(tmp_path, {"item_id": "a", "expected_decision": "yes", "protected": value}))


def test_a_row_with_neither_label_nor_object_says_both(tmp_path):
    with pytest.raises(
        DatasetError,
        match=r"line 1: item a: missing label \(column 'expected_decision'\), and no "
        r"expected object",
    ):
        rows_of(jsonl(tmp_path, {"item_id": "a", "expected": "yes"}))


# --- a rule held against a version's summary (at submit) -----------------------------------------

SUMMARY = {
    "fields": {
        "amount": {"kinds": ["number", "string"], "numeric": True, "not_numeric": None, "values": {"7": 1}},
        "note": {"kinds": ["string"], "numeric": False, "not_numeric": '"twelve"', "values": {"twelve": 1}},
        "category": {
            "kinds": ["string"],
            "numeric": False,
            "not_numeric": '"Billing"',
            "values": {"Billing": 3, "shipping": 1},
        },
        "tags": {"kinds": ["list", "null"], "numeric": False, "not_numeric": "[]", "values": {}},
    }
}


@pytest.mark.parametrize(
    "fields, problem",
    [
        ({"amount": "number", "category": {"type": "label", "labels": ["billing", "shipping"]}, "tags": "list"}, None),
        ({"amount": "exact", "note": "text"}, None),
        ({"missing": "exact"}, r"dataset d: its expected objects have no field missing"),
        # the line quotes no row's value: a pull request's token reads it, of a holdout too
        ({"note": "number"}, r"dataset d: field note \(number\): an expected value is not a number$"),
        (
            {"category": {"type": "label", "labels": ["billing", "account"]}},
            r"field category \(label\): 1 row\(s\) expect one of 1 value\(s\) that are none of the labels "
            r"\(billing, account\)$",
        ),
        ({"tags": "text"}, r"field tags \(text\): an expected value is a list"),
        ({"note": "list"}, r"field note \(list\): an expected value is not a list"),
    ],
)
def test_a_rule_is_held_against_the_expected_values(fields, problem):
    rule = parse_fields(fields)
    if problem is None:
        check_rule(rule, {"expected": SUMMARY}, "d")
        return
    with pytest.raises(UsageError, match=problem):
        check_rule(rule, {"expected": SUMMARY}, "d")


def test_a_label_decision_and_a_fields_dataset_do_not_mix():
    with pytest.raises(UsageError, match=r"dataset d gives one label per row, not an expected object"):
        check_rule(parse_fields({"a": "exact"}), {"counts": {}, "rows": 3}, "d")
    with pytest.raises(
        UsageError,
        match=r"dataset d gives an expected object per row \(amount, note, category, "
        r"tags\): decide it field by field",
    ):
        check_rule(None, {"expected": SUMMARY}, "d")
    check_rule(None, None, "d")
