"""The local model server answers tool calls (gate/mockllm/tools.py), over HTTP, to the
official ``openai`` SDK: the rules of the system message pick the function, the extraction
lines fill its arguments, ``tool_choice`` and ``parallel_tool_calls`` are obeyed, and the
shares of wrong arguments, of no call and of broken arguments fall on the same items every
time. The call path reads what it answers (gate.calls.llm.call_prompt)."""

from __future__ import annotations

import functools
import json

import openai
import pytest

from gate.calls.llm import call_prompt
from gate.mockllm import MockLLMServer
from gate.prompt.spec import parse_spec
from gate.settings import Settings

RULES = """Route the chat.
- escalate: lawyer, furious
- refund: refund*, money back
- lookup_order: where is, tracking
default: none
- extract order_id: /ORD-[0-9]+/
- extract amount: /([0-9]+[.][0-9]{2}) EUR/ as number
- extract reason: legal = lawyer; complaint
"""
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "refund",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "escalate",
            "parameters": {"type": "object", "properties": {"reason": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    },
]


@pytest.fixture(scope="module")
def server():
    with MockLLMServer() as s:
        yield s


@functools.cache
def sdk_client(base_url: str) -> openai.OpenAI:
    """One SDK client a server (each made its own HTTP client and TLS context: ~30 ms of CPU
    a question); every question is still a request over HTTP to the server."""
    return openai.OpenAI(base_url=base_url, api_key="k", max_retries=0)


def ask(server, text: str, system: str = RULES, **extra):
    client = sdk_client(server.base_url)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": text}]
    return client.chat.completions.create(model="mock-1", messages=messages, tools=TOOLS, **extra).choices[0]


def calls(choice) -> list[tuple[str, dict]]:
    return [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls or ()]


def test_the_rules_pick_the_function_and_the_extraction_fills_its_arguments(server):
    refund = ask(server, "Please refund ORD-12, I paid 12.50 EUR.")
    assert refund.finish_reason == "tool_calls" and refund.message.content is None
    assert calls(refund) == [("refund", {"order_id": "ORD-12", "amount": 12.5})]
    assert calls(ask(server, "My lawyer will call about ORD-3")) == [("escalate", {"reason": "legal"})]
    assert calls(ask(server, "where is ORD-4?")) == [("lookup_order", {"order_id": "ORD-4"})]
    thanks = ask(server, "thanks!")
    assert thanks.message.tool_calls is None and thanks.message.content == "none"


def test_tool_choice_and_parallel_calls_are_obeyed(server):
    chosen = {"type": "function", "function": {"name": "lookup_order"}}
    assert calls(ask(server, "refund ORD-1", tool_choice=chosen)) == [("lookup_order", {"order_id": "ORD-1"})]
    assert calls(ask(server, "hello", tool_choice="required"))[0][0] == "refund"
    assert ask(server, "refund ORD-1", tool_choice="none").message.tool_calls is None
    both = RULES + "- parallel: yes\n"
    text = "Where is ORD-5? Otherwise I want my money back, 3.00 EUR."
    assert [name for name, _ in calls(ask(server, text, both))] == ["refund", "lookup_order"]
    assert [name for name, _ in calls(ask(server, text, both, parallel_tool_calls=False))] == ["refund"]


def test_the_shares_of_spoilt_calls_fall_on_the_same_items_every_time(server):
    texts = [f"refund ORD-{i}, {i}.25 EUR" for i in range(60)]
    spoilt = RULES + "- wrong arguments: 30%\n- no call: 10%\n"
    first = [calls(ask(server, t, spoilt)) for t in texts]
    assert first == [calls(ask(server, t, spoilt)) for t in texts]
    none = sum(1 for c in first if not c)
    wrong = sum(1 for t, c in zip(texts, first) if c and c[0][1] != calls(ask(server, t))[0][1])
    assert 2 <= none <= 12 and 10 <= wrong <= 30, (none, wrong)
    broken = [ask(server, t, RULES + "- broken arguments: 100%\n") for t in texts[:3]]
    for choice in broken:
        with pytest.raises(json.JSONDecodeError):
            json.loads(choice.message.tool_calls[0].function.arguments)
    with MockLLMServer(tool_skip_rate=1.0) as skipping:
        assert ask(skipping, "refund ORD-1").message.tool_calls is None


def test_the_call_path_reads_the_servers_calls(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    spec = parse_spec(
        {
            "name": "router",
            "model": "mock-1",
            "tools": TOOLS,
            "messages": [{"role": "system", "content": RULES}, {"history": "item.messages"}],
            "decision": {"type": "tool_call", "fields": {"order_id": "exact", "amount": "number"}},
        }
    )
    turns = [
        {"role": "user", "content": "where is ORD-7?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"order_id": "ORD-7"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "lost"},
        {"role": "user", "content": "Then refund it: 40.00 EUR."},
    ]
    result = call_prompt(spec, {"messages": turns}, settings=Settings(request_timeout=10))
    assert result.decision == '{"amount":40.0,"function":"refund","order_id":"ORD-7"}'
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("refund", {"order_id": "ORD-7", "amount": 40.0})]
    assert result.output == '→ refund({"amount": 40.0, "order_id": "ORD-7"})'
    sent = server.recent_requests()[-1]
    assert sent["tools"] == TOOLS and sent["messages"][1:] == [
        turns[0],
        {**turns[1], "content": None},
        turns[2],
        turns[3],
    ]
