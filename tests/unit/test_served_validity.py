"""Issue 46.8, each reason the runtime gives (``gate.production.result.answer_validity``),
from the reading the gate's call path makes of an answer; the reading itself (what the gate
scores and stores) keeps its marks."""

from __future__ import annotations

import json

from gate.calls.llm import CallResult
from gate.production.result import Invalid, InvalidKind, served_result
from gate.prompt.answer_reading import read_reply
from gate.prompt.spec import parse_spec

LABEL_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "d",
        "schema": {"type": "object", "properties": {"decision": {"enum": ["yes", "no"]}}, "required": ["decision"]},
    },
}
TOOLS = [
    {
        "name": "refund",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}}},
    },
    {"name": "lookup_order", "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}},
]


def spec(**extra):
    return parse_spec({"name": "x", "model": "m", "messages": [{"role": "user", "content": "x"}], **extra})


def served(spec_, text, message=None):
    reading = read_reply(spec_, text, message or {})
    call = CallResult(
        decision=reading.decision if reading.decision is not None else "(invalid)",
        valid=reading.valid,
        raw_output=text,
        latency_ms=1,
        tool_calls=reading.calls,
    )
    return reading, served_result(call, "x", 1, spec=spec_)


def calls(*pairs):
    return {
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
            for i, (name, arguments) in enumerate(pairs)
        ]
    }


def test_a_label_answer_off_the_schema_is_invalid_and_the_gate_still_reads_its_mark():
    s = spec(response_format=LABEL_SCHEMA, decision={"type": "json", "field": "decision"})
    reading, result = served(s, '{"decision": "maybe"}')
    assert reading.decision == "(schema)" and reading.valid  # the gate's reading: unchanged
    assert not result.valid and result.decision == "(invalid)"
    assert result.invalid == Invalid(InvalidKind.SCHEMA, "decision: 'maybe' is not one of ['yes', 'no']")
    _, fine = served(s, '{"decision": "yes"}')
    assert (fine.valid, fine.decision, fine.invalid) == (True, "yes", None)
    _, prose = served(s, "yes")
    assert prose.invalid == Invalid(InvalidKind.SCHEMA, "not JSON")


def test_a_fields_answer_that_is_not_an_object_is_invalid():
    s = spec(decision={"type": "fields", "fields": {"order_id": "exact"}})
    _, result = served(s, "no idea")
    assert (result.valid, result.decision, result.invalid.kind) == (False, "{}", InvalidKind.NOT_AN_OBJECT)
    assert str(result.invalid) == "not_an_object: not a JSON object"


def test_a_tool_call_that_failed_is_invalid_by_label_and_with_fields():
    by_label = spec(tools=TOOLS, decision={"type": "tool_call"})
    _, ok = served(by_label, "", calls(("refund", '{"order_id": "A", "amount": 2}')))
    assert (ok.valid, ok.decision, ok.invalid) == (True, "refund", None)
    reading, broken = served(by_label, "", calls(("refund", "{not json")))
    assert reading.valid and reading.decision == "(arguments not JSON)"  # the gate's reading: unchanged
    assert not broken.valid and broken.invalid == Invalid(InvalidKind.TOOL_CALL, "not JSON")
    assert broken.decision == "(invalid)"
    with_fields = spec(tools=TOOLS, decision={"type": "tool_call", "fields": {"amount": "number"}})
    _, off = served(with_fields, "", calls(("refund", '{"order_id": "A", "amount": "2"}')))
    assert not off.valid and off.invalid is not None and off.invalid.kind is InvalidKind.TOOL_CALL
    assert "(arguments)" not in json.loads(off.decision) and json.loads(off.decision)["function"] == "refund"
