"""A decision read from the model's tool calls (gate/prompt/tool_decision.py): the label a
call reads as, the canonical reading of a decision with fields, arguments that are not JSON
or off their function's schema (a MISMATCH marked so, never an error), the masks a call
leaves (an argument compared only where the expected call has it), parallel calls compared
as a set, and the executor's verdict on them. Answers are the model's: bounded."""

from __future__ import annotations

import json
import time

import pytest

from gate.prompt.answer_reading import read_reply
from gate.prompt.spec import parse_spec
from gate.prompt.tool_decision import MAX_CALLS, score_calls, wrong_calls
from gate.records import ClaimedItem
from workers.execute.results import judged

TOOLS = [
    {
        "name": "refund",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
            "required": ["order_id", "amount"],
        },
    },
    {"name": "escalate", "parameters": {"type": "object", "properties": {"reason": {"type": "string"}}}},
    {"name": "lookup_order", "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}},
]
FIELDS = {"order_id": "exact", "amount": {"type": "number", "tolerance": 0.01}, "reason": "text"}


def spec(fields: bool = True):
    decision = {"type": "tool_call", "fields": FIELDS} if fields else {"type": "tool_call"}
    return parse_spec(
        {
            "name": "r",
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "tools": TOOLS,
            "decision": decision,
        }
    )


def answer(*calls, content=None) -> dict:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
            for i, (name, args) in enumerate(calls)
        ],
    }


REFUND = ("refund", {"order_id": "ORD-1", "amount": 12.5})


@pytest.mark.parametrize(
    "message, label",
    [
        (answer(), "none"),
        ({"role": "assistant", "content": "I cannot help."}, "none"),
        (answer(REFUND), "refund"),
        (answer(REFUND, ("refund", {"order_id": "ORD-2", "amount": 1})), "refund"),
        (answer(("lookup_order", {"order_id": "ORD-1"}), ("escalate", {"reason": "x"})), None),
        (answer(("delete_account", {})), None),
        (answer(("refund", "{oops")), "(arguments not JSON)"),
        (answer(("refund", {"order_id": "ORD-1", "amount": "twelve"})), "(arguments off schema)"),
        (answer(*[REFUND] * (MAX_CALLS + 1)), None),
    ],
)
def test_a_decision_by_label_reads_the_called_function(message, label):
    reading = read_reply(spec(False), message.get("content") or "", message)
    assert reading.decision == label and reading.valid == (label is not None)


def test_several_functions_read_as_a_label_when_the_prompt_lists_it():
    listed = parse_spec({**spec(False).to_config(), "labels": ["escalate+lookup_order", "refund", "none"]})
    message = answer(("lookup_order", {"order_id": "ORD-1"}), ("escalate", {"reason": "x"}))
    assert read_reply(listed, "", message).decision == "escalate+lookup_order"


def test_a_decision_with_fields_keeps_the_call_as_canonical_json():
    reading = read_reply(spec(), "", answer(("refund", {"order_id": "ORD-1", "amount": 12.5, "note": "n"})))
    assert reading.decision == '{"amount":12.5,"function":"refund","order_id":"ORD-1"}'
    assert reading.calls[0].arguments == {"order_id": "ORD-1", "amount": 12.5, "note": "n"}
    assert read_reply(spec(), "hi", {"content": "hi"}).decision == '{"function":"none"}'
    off = read_reply(spec(), "", answer(("refund", {"order_id": "ORD-1"}))).decision
    assert json.loads(off)["(arguments)"] == "off schema: 'amount' is a required property"
    broken = read_reply(spec(), "", answer(("refund", '{"order_id": "ORD-1", "amount": 1')))
    assert json.loads(broken.decision) == {"(arguments)": "not JSON", "function": "refund"}
    assert broken.calls[0].arguments is None and broken.calls[0].problem == "not JSON"


def expected(function: str, **arguments) -> str:
    return json.dumps({"function": function, **arguments}, sort_keys=True, separators=(",", ":"))


def read(*calls) -> str:
    return read_reply(spec(), "", answer(*calls)).decision


def bits(rule, *names) -> int:
    return sum(rule.bit(n) for n in names)


def test_each_argument_is_compared_where_the_expected_call_has_it():
    rule = spec().decision.fields  # amount, function, order_id, reason
    right = score_calls(rule, read(REFUND), expected("refund", order_id="ORD-1", amount=12.49))
    assert right.match and right.wrong == 0 and right.missing == bits(rule, "reason")  # reason: not compared
    cents = score_calls(
        rule, read(("refund", {"order_id": "ORD-1", "amount": 12})), expected("refund", order_id="ORD-1", amount=12.5)
    )
    assert not cents.match and cents.wrong == bits(rule, "amount") and cents.missing == bits(rule, "reason")
    routed = score_calls(rule, read(("escalate", {"reason": "angry"})), expected("refund", order_id="ORD-1", amount=1))
    assert routed.wrong == bits(rule, "function", "amount", "order_id")
    assert routed.missing == bits(rule, "amount", "order_id", "reason")
    label_row = score_calls(rule, read(), "none")  # a row that gives a label alone
    assert label_row.match and label_row.missing == bits(rule, "amount", "order_id", "reason")


def test_arguments_off_their_schema_are_a_mismatch_whatever_the_fields():
    rule = spec().decision.fields
    off = read(("refund", {"order_id": "ORD-1", "amount": "12.5"}))  # the number comparator reads "12.5"
    outcome = score_calls(rule, off, expected("refund", order_id="ORD-1", amount=12.5))
    assert not outcome.match and outcome.wrong == 0
    assert wrong_calls(rule, off, expected("refund", order_id="ORD-1", amount=12.5))[0] == {
        "field": "(arguments)",
        "expected": None,
        "actual": "off schema: amount: '12.5' is not of type 'number'",
        "missing": False,
    }


def test_parallel_calls_are_compared_as_a_set_by_function_then_arguments():
    rule = spec().decision.fields
    want = json.dumps(
        {
            "calls": [
                {"function": "lookup_order", "order_id": "ORD-1"},
                {"function": "lookup_order", "order_id": "ORD-2"},
            ],
            "function": "lookup_order+lookup_order",
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    either_order = [("lookup_order", {"order_id": "ORD-2"}), ("lookup_order", {"order_id": "ORD-1"})]
    assert score_calls(rule, read(*either_order), want).match
    assert score_calls(rule, read(*reversed(either_order)), want).match
    one_wrong = score_calls(
        rule, read(("lookup_order", {"order_id": "ORD-2"}), ("lookup_order", {"order_id": "ORD-9"})), want
    )
    assert not one_wrong.match and one_wrong.wrong == bits(rule, "order_id")
    one_short = score_calls(rule, read(("lookup_order", {"order_id": "ORD-1"})), want)
    assert one_short.wrong == bits(rule, "function", "order_id")
    one_more = score_calls(rule, read(*either_order, ("escalate", {"reason": "x"})), want)
    assert not one_more.match and one_more.wrong == bits(rule, "function")


def test_the_executor_judges_a_call_and_writes_its_masks():
    rule_spec = spec()
    item = ClaimedItem(1, 0, "c1", {}, expected("refund", order_id="ORD-1", amount=12.5), 1)
    out = judged(rule_spec.decision, read(("refund", {"order_id": "ORD-1", "amount": 13})), item.expected_decision)
    assert out == {"verdict": "MISMATCH", "fields_wrong": 1, "fields_missing": 8}
    label = judged(spec(False).decision, "refund", "refund")
    assert label == {"verdict": "MATCH"}


def test_a_hostile_answer_costs_little_and_is_kept_bounded():
    huge = {"order_id": "O" * 100_000, "amount": 1}
    deep = "[" * 5000 + "]" * 5000
    message = answer(("refund", huge), ("refund", '{"order_id": ' + deep + "}"), *[REFUND] * 50)
    message["tool_calls"][0]["function"]["name"] = "n" * 10_000
    started = time.perf_counter()
    reading = read_reply(spec(), "", message)
    assert time.perf_counter() - started < 1.0
    assert len(reading.calls) == MAX_CALLS and len(reading.calls[0].name) == 64
    kept = json.loads(reading.decision)
    assert kept["(arguments)"] == f"more than {MAX_CALLS} calls" and len(reading.decision) < 40_000
    assert reading.calls[1].problem == "not JSON"
