"""Tools in the prompt file: ``tools`` (OpenAI function tools), ``tool_choice``,
``parallel_tool_calls`` and the decision read from the call, parsed and bounded like
everything a pull request sends, stored in the config, sent in the request and part of the
request key; the prompt format's JSON Schema refuses what the parser refuses."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
from support.cli import ROOT

from gate.errors import SpecError
from gate.kinds import rule_of
from gate.prompt.request_keys import decision_rule, request_key
from gate.prompt.spec import parse_spec, request_kwargs
from gate.prompt.structured.rule import CallRule

SCHEMA = json.loads((ROOT / "gate" / "schemas" / "prompt.schema.json").read_text())
TOOLS = [
    {
        "name": "refund",
        "description": "Refund an order.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
            "required": ["order_id", "amount"],
        },
    },
    {
        "type": "function",
        "function": {
            "name": "escalate",
            "description": "Hand over to a person.",
            "parameters": {"type": "object", "properties": {"reason": {"type": "string"}}},
        },
    },
]


def router(**extra) -> dict:
    return {
        "name": "router",
        "model": "m",
        "messages": [{"role": "system", "content": "route"}, {"role": "user", "content": "{{ item.text }}"}],
        "tools": copy.deepcopy(TOOLS),
        **extra,
    }


def refused(data: dict, match: str, schema: bool = False) -> None:
    """The parser refuses it in one line (and, where JSON Schema can say it, so does the
    prompt format's schema: ``schema``)."""
    with pytest.raises(SpecError, match=match) as caught:
        parse_spec(data, file="p.yaml")
    assert "\n" not in str(caught.value)
    if schema:
        assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(data)), "the prompt schema accepts it"


def test_tools_are_stored_in_openai_form_and_sent_as_the_request_fields():
    spec = parse_spec(router(tool_choice="required", parallel_tool_calls=False, decision={"type": "tool_call"}))
    config = spec.to_config()
    assert [t["function"]["name"] for t in config["tools"]] == ["refund", "escalate"]
    assert config["tools"][0] == {"type": "function", "function": TOOLS[0]}
    assert (config["tool_choice"], config["parallel_tool_calls"]) == ("required", False)
    assert parse_spec(config) == spec and parse_spec(config).config_hash == spec.config_hash
    body = request_kwargs(spec, [{"role": "user", "content": "x"}])
    assert body["tools"] == config["tools"] and body["tool_choice"] == "required"
    assert body["parallel_tool_calls"] is False
    assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(config)) == []


def test_a_prompt_without_tools_keeps_its_config_and_request():
    spec = parse_spec({k: v for k, v in router().items() if k != "tools"})
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(spec.to_config())
    assert set(request_kwargs(spec, [])) == {"model", "messages"}


def test_one_function_chosen():
    choice = {"type": "function", "function": {"name": "escalate"}}
    spec = parse_spec(router(tool_choice=choice))
    assert request_kwargs(spec, [])["tool_choice"] == choice
    refused(
        router(tool_choice={"type": "function", "function": {"name": "delete_all"}}), "is not one of the declared tools"
    )


def test_two_prompts_differing_only_in_a_tools_description_have_different_keys():
    messages = [{"role": "user", "content": "refund ORD-1"}]
    other = router()
    other["tools"][0]["description"] = "Refund an order (only when asked twice)."
    one, two = parse_spec(router()), parse_spec(other)
    assert request_key(one, messages, None) != request_key(two, messages, None)
    again = parse_spec(router())
    assert request_key(one, messages, None) == request_key(again, messages, None)
    schema_changed = router()
    schema_changed["tools"][0]["parameters"]["required"] = ["order_id"]
    assert request_key(parse_spec(schema_changed), messages, None) != request_key(one, messages, None)
    assert request_key(parse_spec(router(parallel_tool_calls=True)), messages, None) != request_key(one, messages, None)


def test_a_decision_by_the_call_has_the_functions_and_none_for_labels():
    spec = parse_spec(router(decision={"type": "tool_call"}))
    assert spec.labels == ("refund", "escalate", "none")
    assert decision_rule(spec) == {"type": "tool_call", "labels": ["refund", "escalate", "none"]}
    listed = parse_spec(router(decision={"type": "tool_call"}, labels=["refund", "escalate+refund", "none"]))
    assert listed.labels == ("refund", "escalate+refund", "none")
    refused(router(decision={"type": "tool_call"}, labels=["refund", "refund+escalate"]), "in name order")
    refused(router(decision={"type": "tool_call"}, labels=["refund", "cancel"]), "is not a label of a tool_call")


def test_a_decision_by_the_call_with_fields_adds_the_function_field():
    spec = parse_spec(
        router(decision={"type": "tool_call", "fields": {"order_id": "exact", "amount": {"type": "number"}}})
    )
    rule = spec.decision.fields
    assert isinstance(rule, CallRule) and rule.names == ("amount", "function", "order_id")
    assert rule.get("function").labels == ("refund", "escalate", "none") and rule.functions == ("refund", "escalate")
    stored = decision_rule(spec)
    assert stored["fields"]["function"] == {"type": "label", "labels": ["refund", "escalate", "none"]}
    assert isinstance(rule_of(stored), CallRule) and rule_of(stored) == rule
    assert parse_spec(spec.to_config()) == spec
    refused(
        router(decision={"type": "tool_call", "fields": {"function": "exact", "amount": "number"}}),
        r"decision\.fields\.function: is the called function",
    )
    refused(router(decision={"type": "tool_call", "fields": {"amount": "number"}}, labels=["a", "b"]), "labels")


@pytest.mark.parametrize(
    "data, match, schema",
    [
        (router(tools=[]), r"tools: must be a non-empty list", True),
        (
            router(tools=[{"name": "refund"}, {"name": "refund"}]),
            r"tools\[1\]\.name: 'refund' is declared twice",
            False,
        ),
        (router(tools=[{"name": "None"}]), r"tools\[0\]\.name: 'None' is reserved", True),
        (router(tools=[{"name": "drop table"}]), r"tools\[0\]\.name: must be a function name", True),
        (router(tools=[{"name": "a", "url": "http://x"}]), r"tools\[0\]\.url: unknown field", True),
        (
            router(tools=[{"name": "a", "parameters": {"type": "array"}}]),
            r"tools\[0\]\.parameters\.type: must be object",
            True,
        ),
        (
            router(tools=[{"name": "a", "parameters": {"type": "object", "$ref": "https://evil.example/x"}}]),
            r"tools\[0\]\.parameters\.\$ref: .* is not a part of this schema",
            False,
        ),
        (router(tools=[{"name": f"f{i}"} for i in range(33)]), r"tools: declares 33 tools: at most 32", True),
        (
            router(tools=[{"name": f"f{i}", "description": "d" * 3000} for i in range(25)]),
            r"tools: are [0-9,]+ bytes as JSON: at most 64 KiB together",
            False,
        ),
        (
            router(tools=[{"name": "a", "description": "d" * 4001}]),
            r"tools\[0\]\.description: must be a string of at most",
            True,
        ),
        ({**router(), "tools": None, "tool_choice": "auto"}, r"tool_choice: goes with tools", True),
        (router(tool_choice="always"), r"tool_choice: must be one of auto, none, required", True),
        (router(parallel_tool_calls="yes"), r"parallel_tool_calls: must be true or false", True),
        (
            {**router(), "tools": None, "decision": {"type": "tool_call"}},
            r"decision\.type: tool_call reads the call",
            True,
        ),
        (router(decision={"type": "tool_call", "pattern": "x"}), r"decision\.pattern: unknown field", True),
    ],
)
def test_tools_the_gate_cannot_take_are_refused_in_one_line(data, match, schema):
    data = {k: v for k, v in data.items() if v is not None}
    refused(data, match, schema)


def test_the_example_router_is_valid_for_the_prompt_schema():
    import yaml

    for path in (ROOT / "prompts-example").glob("*/support-router*.yaml"):
        assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(yaml.safe_load(path.read_text()))) == []


def test_a_calls_token_estimate_counts_the_tools_and_the_conversations_calls():
    from gate.ratelimit.rules import estimate_tokens

    plain = parse_spec({k: v for k, v in router().items() if k != "tools"})
    tooled = parse_spec(router())
    turn = {"role": "user", "content": "x" * 40}
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"function": {"name": "refund", "arguments": "y" * 400}}],
    }
    assert estimate_tokens(plain, [turn]) == 10 + 4 + 16
    tools_chars = sum(len(json.dumps(t["parameters"], separators=(",", ":"))) for t in (TOOLS[0], TOOLS[1]["function"]))
    assert estimate_tokens(tooled, [turn]) >= 10 + 4 + 16 + tools_chars // 4
    assert estimate_tokens(plain, [turn, call]) == 10 + 100 + 8 + 16
