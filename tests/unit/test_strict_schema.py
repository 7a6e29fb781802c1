"""Strict structured output: ``response_format: {type: json_schema, json_schema: {name,
schema, strict}}`` checked when the file is read and passed through as is; every answer
checked against the schema, one that does not fit a MISMATCH marked ``(schema)`` whatever
its decision reads; the request key of such a prompt says so (its answers are read
differently), the key of any other prompt stays what it was."""

from __future__ import annotations

import json

import pytest

from gate.errors import SpecError
from gate.prompt.answer_reading import read_reply
from gate.prompt.answer_schema import schema_broken
from gate.prompt.request_keys import decision_rule
from gate.prompt.spec import parse_spec, request_kwargs
from workers.execute.results import judged

SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["order_id", "amount"],
    "additionalProperties": False,
}
FORMAT = {"type": "json_schema", "json_schema": {"name": "order", "schema": SCHEMA, "strict": True}}


def extractor(**extra):
    return parse_spec(
        {
            "name": "x",
            "model": "m",
            "messages": [{"role": "user", "content": "{{ item.text }}"}],
            "response_format": FORMAT,
            "decision": {"type": "fields", "fields": {"order_id": "exact", "amount": "number"}},
            **extra,
        }
    )


def test_the_format_is_passed_through_as_written():
    assert request_kwargs(extractor(), [])["response_format"] == FORMAT


def test_an_answer_off_the_schema_is_marked_and_never_matches():
    spec = extractor()
    fine = read_reply(spec, '{"order_id": "ORD-1", "amount": 3}', {})
    assert fine.decision == '{"amount":3,"order_id":"ORD-1"}' and not schema_broken(fine.decision)
    off = read_reply(spec, '{"order_id": "ORD-1", "amount": "3"}', {})
    assert json.loads(off.decision) == {
        "(schema)": "amount: '3' is not of type 'number'",
        "amount": "3",
        "order_id": "ORD-1",
    }
    expected = '{"amount":3,"order_id":"ORD-1"}'
    assert judged(spec.decision, off.decision, expected)["verdict"] == "MISMATCH"  # the fields alone would match
    assert judged(spec.decision, fine.decision, expected)["verdict"] == "MATCH"
    prose = read_reply(spec, "The order is ORD-1.", {})
    assert json.loads(prose.decision) == {"(schema)": "not JSON"}


def test_a_label_decision_on_a_strict_schema_reads_the_marker():
    spec = parse_spec(
        {
            "name": "x",
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "d",
                    "schema": {
                        "type": "object",
                        "properties": {"decision": {"enum": ["yes", "no"]}},
                        "required": ["decision"],
                    },
                },
            },
            "decision": {"type": "json", "field": "decision"},
        }
    )
    assert read_reply(spec, '{"decision": "yes"}', {}).decision == "yes"
    assert read_reply(spec, '{"decision": "maybe"}', {}).decision == "(schema)"
    assert judged(spec.decision, "(schema)", "yes") == {"verdict": "MISMATCH"}


def test_only_a_prompt_with_a_schema_gets_a_new_request_key():
    assert decision_rule(extractor())["answer_schema"] == "checked"
    plain = parse_spec(
        {
            "name": "x",
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_object"},
        }
    )
    assert decision_rule(plain) == {"type": "first_word", "labels": ["yes", "no"]}


@pytest.mark.parametrize(
    "json_schema, problem",
    [
        (None, r"response_format\.json_schema: is required for type json_schema"),
        ({"name": "o", "schema": SCHEMA, "url": "x"}, r"response_format\.json_schema\.url: unknown field"),
        ({"name": "a b", "schema": SCHEMA}, r"response_format\.json_schema\.name: must be a name"),
        (
            {"name": "o", "schema": SCHEMA, "strict": "yes"},
            r"response_format\.json_schema\.strict: must be true or false",
        ),
        (
            {"name": "o", "schema": {"type": "object", "$ref": "http://x/y"}},
            r"response_format\.json_schema\.schema\.\$ref",
        ),
        ({"name": "o"}, r"response_format\.json_schema\.schema: must be a JSON Schema"),
    ],
)
def test_a_format_the_gate_cannot_check_is_refused_in_one_line(json_schema, problem):
    response_format = {"type": "json_schema"} | ({"json_schema": json_schema} if json_schema is not None else {})
    with pytest.raises(SpecError, match=problem):
        extractor(response_format=response_format)
