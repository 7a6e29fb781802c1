"""A dataset's expected tool calls as the import reads them
(gate/prompt/structured/expected_calls.py): the function in the label column, its arguments
as an ``expected`` object (JSONL) or ``expected.<argument>`` columns (CSV), several calls
as a list; each problem one line naming the row; the summary stored with the version, and
a decision held against it at submit, in one line that quotes no row's value."""

from __future__ import annotations

import csv
import json

import pytest

from gate.datasets.sources import open_source
from gate.errors import DatasetError, UsageError
from gate.kinds.tool_call import TOOL_CALL
from gate.prompt.spec import parse_spec
from gate.prompt.structured.expected_calls import CallsSummary

TOOLS = [
    {
        "name": "refund",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}}},
    },
    {"name": "lookup_order", "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}},
]


def rows_of(path):
    reader = open_source(str(path))
    rows, cursor = [], None
    while True:
        page = reader.read_page(cursor, 100)
        rows += page.rows
        if page.next_cursor is None:
            return rows
        cursor = page.next_cursor


def jsonl(tmp_path, *records):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_call_with_arguments_is_kept_as_canonical_json_and_out_of_the_input(tmp_path):
    path = jsonl(
        tmp_path,
        {
            "item_id": "a",
            "text": "refund ORD-1",
            "expected_decision": "refund",
            "expected": {"order_id": "ORD-1", "amount": 12.5},
        },
        {"item_id": "b", "text": "thanks", "expected_decision": "none"},
        {
            "item_id": "c",
            "text": "two orders",
            "expected": [
                {"function": "lookup_order", "arguments": {"order_id": "ORD-2"}},
                {"function": "lookup_order", "arguments": {"order_id": "ORD-1"}},
            ],
        },
    )
    a, b, c = rows_of(path)
    assert (a.expected, a.call, a.input) == (
        '{"amount":12.5,"function":"refund","order_id":"ORD-1"}',
        True,
        {"text": "refund ORD-1"},
    )
    assert (b.expected, b.call) == ("none", False)
    assert json.loads(c.expected) == {
        "calls": [{"function": "lookup_order", "order_id": "ORD-1"}, {"function": "lookup_order", "order_id": "ORD-2"}],
        "function": "lookup_order+lookup_order",
    }
    assert c.call and c.input == {"text": "two orders"}


def test_csv_argument_columns_and_an_empty_row_of_them(tmp_path):
    path = tmp_path / "d.csv"
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["item_id", "text", "expected_decision", "expected.order_id", "expected.amount"])
        writer.writerow(["a", "refund", "refund", "ORD-1", "12.50"])
        writer.writerow(["b", "hello", "none", "", ""])
    a, b = rows_of(path)
    assert json.loads(a.expected) == {"function": "refund", "order_id": "ORD-1", "amount": "12.50"}
    assert (b.expected, b.call, b.input) == ("none", False, {"text": "hello"})


@pytest.mark.parametrize(
    "record, problem",
    [
        (
            {"expected_decision": "none", "expected": {"order_id": "ORD-1"}},
            "expects no call (none) but gives arguments",
        ),
        (
            {"expected_decision": "refund", "expected": {"function": "x"}},
            "function is the called function, not an argument",
        ),
        ({"expected_decision": "re fund", "expected": {"a": 1}}, "the expected function is not a function's name"),
        ({"expected_decision": "refund", "expected": {"a": {"b": 1}}}, "expected field a is an object"),
        (
            {"expected_decision": "refund", "expected": [{"function": "refund"}]},
            "gives both a label and a list of expected calls",
        ),
        ({"expected": [{"function": "refund"}]}, "a list of expected calls has 2 to 8 calls"),
        ({"expected": [{"function": "refund"}, {"name": "x"}]}, "expected call 2 is not {function, arguments}"),
        (
            {"expected": [{"function": "refund"}, {"function": "refund", "arguments": [1]}]},
            "expected call 2: arguments must be an object",
        ),
    ],
)
def test_an_expected_call_the_gate_cannot_compare_is_refused_naming_the_row(tmp_path, record, problem):
    with pytest.raises(DatasetError) as caught:
        rows_of(jsonl(tmp_path, {"item_id": "r7", "text": "x", **record}))
    assert str(caught.value).startswith(f"{tmp_path / 'd.jsonl'}: line 1: item r7: {problem}")
    assert "\n" not in str(caught.value)


def summary(tmp_path, *records) -> dict:
    calls = CallsSummary()
    for row in rows_of(jsonl(tmp_path, *records)):
        calls.add(row.position, row.expected, row.call, row.position)
    return {"calls": calls.to_json()} if calls.to_json() else {}


def router(fields=None):
    decision = {"type": "tool_call", "fields": fields} if fields else {"type": "tool_call"}
    return parse_spec(
        {
            "name": "r",
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "tools": TOOLS,
            "decision": decision,
        }
    )


ROWS = [
    {"item_id": "a", "expected_decision": "refund", "expected": {"order_id": "ORD-1", "amount": 12.5}},
    {"item_id": "b", "expected_decision": "lookup_order", "expected": {"order_id": "ORD-2"}},
    {"item_id": "c", "expected_decision": "none"},
]


def test_a_version_of_calls_is_summarised_and_decisions_held_against_it(tmp_path):
    fields = summary(tmp_path, *ROWS)
    assert fields["calls"]["functions"] == {"lookup_order": 1, "none": 1, "refund": 1}
    assert set(fields["calls"]["fields"]) == {"amount", "order_id"} and fields["calls"]["rows"] == 2
    TOOL_CALL.check_rows(router({"order_id": "exact", "amount": "number"}).decision.fields, fields, "d")
    with pytest.raises(
        UsageError, match="dataset d gives expected arguments of tool calls: decide them field by field"
    ):
        TOOL_CALL.check_rows(router().decision.fields, fields, "d")
    with pytest.raises(UsageError, match=r"dataset d: no row expects argument note \(they give amount, order_id\)"):
        TOOL_CALL.check_rows(router({"note": "text"}).decision.fields, fields, "d")
    with pytest.raises(UsageError, match=r"dataset d gives no expected arguments"):
        TOOL_CALL.check_rows(router({"order_id": "exact"}).decision.fields, {}, "d")


def test_rows_expecting_undeclared_functions_are_counted_not_quoted(tmp_path):
    fields = summary(
        tmp_path, *ROWS, {"item_id": "d", "expected_decision": "wire_money_secretly", "expected": {"x": 1}}
    )
    with pytest.raises(UsageError) as caught:
        TOOL_CALL.check_rows(router({"order_id": "exact"}).decision.fields, fields, "d")
    assert str(caught.value) == (
        "dataset d: 1 row(s) expect one of 1 function(s) the prompt does not declare (its tools: refund, lookup_order)"
    )
    assert "wire_money" not in str(caught.value)


def test_an_argument_its_comparator_cannot_read_is_refused(tmp_path):
    fields = summary(
        tmp_path, {"item_id": "a", "expected_decision": "refund", "expected": {"order_id": "ORD-1", "amount": "twelve"}}
    )
    with pytest.raises(UsageError, match=r"dataset d: argument amount \(number\): an expected value is not a number"):
        TOOL_CALL.check_rows(router({"amount": "number"}).decision.fields, fields, "d")
