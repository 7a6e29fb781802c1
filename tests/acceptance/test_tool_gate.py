"""Prompts that call tools and hold conversations, end to end on MariaDB with the local
model server over HTTP (the official openai SDK) and real workers (in-process): a router
decided by its tool call judged on the function and on each argument over a conversation
dataset, and production calling the live router; a strict-schema candidate that breaks its
schema on some items rejected naming them; parallel calls counted; a dataset whose
conversation is malformed refused in one line; a pull request whose tools are malformed or
oversized refused one line per problem with nothing staged. The verdicts are those the
example's rules give each conversation (prompts-example/candidates/support-router-v2.yaml
says which ones each version gets wrong)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator
from support.action_harness import HEAD1, act, fast, github_env, make_workspace, pr_payload
from support.migrated import migrated

from gate import gateconfig
from gate.domain import Gate
from gate.errors import DatasetError, UsageError
from gate.prompt.spec import load_spec, parse_spec
from gate.report.markdown import render_report_markdown
from gate.runtime import PromptRuntime
from gate.schemas import status_schema
from workers.supervisor import run_until_terminal

EXAMPLE = Path(__file__).resolve().parents[2] / "prompts-example"
ROUTER, CANDIDATE = EXAMPLE / "prompts" / "support-router.yaml", EXAMPLE / "candidates" / "support-router-v2.yaml"
CONVERSATIONS = EXAMPLE / "datasets" / "support-conversations.jsonl"
BARS = {"min_field_accuracy": {"function": "0.8", "amount": "0.85"}}


def valid(report) -> None:
    Draft202012Validator(status_schema()).validate(json.loads(json.dumps(report.to_dict())))


def failing(gate, report) -> list[str]:
    return sorted(f.item_id for f in gate.status(report.update.id, failures=50).runs[0].failures)


def by_field(run) -> dict[str, tuple[int, int]]:
    return {f["field"]: (f["right"], f["of"]) for f in run.fields["fields"]}


def test_a_router_candidate_is_judged_on_the_function_and_each_argument(mysql_gate, model):
    gate = mysql_gate
    gate.register_dataset("support-conversations", str(CONVERSATIONS))
    gate.map_dataset("support-router", "support-conversations", "0.75", bars=BARS)
    (live,) = run_until_terminal(gate, [gate.submit(load_spec(ROUTER), "apply")], timeout=120)
    assert live.status == "APPLIED", live.update.reason
    assert failing(gate, live) == ["conv-05", "conv-06", "conv-14", "conv-20", "conv-24"]

    (report,) = run_until_terminal(gate, [gate.submit(load_spec(CANDIDATE), "check")], timeout=120)
    (run,) = report.runs
    assert report.status == "REJECTED"
    assert report.update.reason == "missed: support-conversations min_field_accuracy[amount] 50.0% < bar 85%"
    assert (run.matches, run.scored) == (21, 26) and (run.comparison["fixed"], run.comparison["broken"]) == (4, 4)
    assert by_field(run) == {"amount": (4, 8), "function": (25, 26), "order_id": (16, 16), "reason": (5, 5)}
    amount = next(f for f in run.fields["fields"] if f["field"] == "amount")
    assert (amount["live"]["accuracy"], amount["live"]["fixed"], amount["live"]["broken"]) == (7 / 8, 1, 4)
    assert run.fields["confusion"]["function"]["rows"][2] == ["none", [0, 1, 4, 0]]  # conv-24, both versions
    assert run.tool_calls["arguments_most_wrong"] == [{"field": "amount", "wrong": 4, "of": 8}]
    assert failing(gate, report) == ["conv-09", "conv-11", "conv-13", "conv-15", "conv-24"]
    samples = {f.item_id: f for f in gate.status(report.update.id, failures=50).runs[0].failures}
    assert samples["conv-11"].call == {
        "expected": 'refund(amount=35.5, order_id="ORD-2003")',
        "actual": 'refund(amount=35, order_id="ORD-2003")',
        "problem": None,
    }
    assert [t["role"] for t in samples["conv-11"].turns] == ["assistant", "tool", "user"]
    markdown = render_report_markdown(gate.status(report.update.id, failures=10))
    # a broken item is listed once, with its conversation and only the argument it broke, marked; a
    # failing one with the function expected and the one called
    (broken,) = [line for line in markdown.splitlines() if line.startswith("| conv-11 |")]
    assert broken.startswith("| conv-11 | **assistant**: (a tool call)<br>**tool**: delivered, damaged on arrival<br>")
    assert broken.endswith("| **amount** 35.5 → 35 |")
    (failing_row,) = [line for line in markdown.splitlines() if line.startswith("| conv-24 |")]
    assert failing_row.startswith("| conv-24 | **tool**: delivered<br>") and failing_row.endswith(
        "| **function** none → lookup\\_order |"
    )
    assert "| support-conversations | amount read right | 85% | 50.0% | ❌ fail |" in markdown
    for r in (live, report):
        valid(r)

    production = PromptRuntime(gate=gate).prompt("support-router")
    result = production.decide({"messages": [{"role": "user", "content": "Please refund ORD-77, 19.99 EUR."}]})
    assert result.decision == '{"amount":19.99,"function":"refund","order_id":"ORD-77"}'
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("refund", {"order_id": "ORD-77", "amount": 19.99})]


def test_an_answer_is_never_reused_across_prompts_differing_only_in_a_tools_description(mysql_gate, model):
    gate = mysql_gate
    gate.register_dataset("support-conversations", str(CONVERSATIONS))
    gate.map_dataset("support-router", "support-conversations", "0.75", bars=BARS)
    (live,) = run_until_terminal(gate, [gate.submit(load_spec(ROUTER), "apply")], timeout=120)
    (again,) = run_until_terminal(gate, [gate.submit(load_spec(ROUTER), "check")], timeout=120)
    assert again.runs[0].reused_total == 26  # the same request: the answers already paid for
    config = load_spec(ROUTER).to_config()
    config["tools"][1]["function"]["description"] = "Refund an amount of an order, in euros, once it was looked up."
    before = model.stats()["requests"]
    (changed,) = run_until_terminal(gate, [gate.submit(parse_spec(config), "check")], timeout=120)
    assert changed.status == "PASSED" and changed.runs[0].reused_total == 0
    assert model.stats()["requests"] - before == 26


SCHEMA_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "order",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
            "required": ["order_id", "amount"],
            "additionalProperties": False,
        },
    },
}
EXTRACT = (
    "Read the order id and the amount as JSON.\n"
    "- extract order_id: /ORD-[0-9]+/\n"
    "- extract amount: /([0-9]+[.][0-9]{2})/ as number\n"
)
# the amount as text where the currency comes first ("EUR 10.00"): the number comparator reads
# it right, the schema (a number) does not take it
AS_TEXT = EXTRACT + "- extract amount: /EUR ([0-9]+[.][0-9]{2})/\n"


def extractor(system: str):
    return parse_spec(
        {
            "name": "order-extract",
            "model": "mock-1",
            "response_format": SCHEMA_FORMAT,
            "decision": {
                "type": "fields",
                "fields": {"order_id": "exact", "amount": {"type": "number", "tolerance": 0.01}},
            },
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": "{{ item.email }}"}],
        }
    )


def test_a_strict_schema_candidate_that_breaks_its_schema_is_rejected_naming_the_items(mysql_gate, model, tmp_path):
    rows = []
    for i in range(20):
        amount = f"{10 + i}.{i:02d}"
        money = f"EUR {amount}" if i % 7 == 0 else f"{amount} EUR"
        rows.append(
            {
                "item_id": f"mail-{i:02d}",
                "email": f"Order ORD-{500 + i}: {money}.",
                "expected": {"order_id": f"ORD-{500 + i}", "amount": float(amount)},
            }
        )
    (tmp_path / "emails.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    gate = mysql_gate
    gate.register_dataset("emails", str(tmp_path / "emails.jsonl"))
    gate.map_dataset("order-extract", "emails", "0.9")
    (live,) = run_until_terminal(gate, [gate.submit(extractor(EXTRACT), "apply")], timeout=120)
    assert live.status == "APPLIED" and live.runs[0].schema == {"broken": 0}
    (report,) = run_until_terminal(gate, [gate.submit(extractor(AS_TEXT), "check", full=True)], timeout=120)
    (run,) = report.runs
    assert report.status == "REJECTED" and (run.matches, run.scored) == (17, 20)
    assert run.schema == {"broken": 3}
    assert {f["field"]: f["wrong"] for f in run.fields["fields"]} == {
        "amount": 0,
        "order_id": 0,
    }  # the fields read right
    samples = gate.status(report.update.id, failures=10).runs[0].failures
    assert [s.item_id for s in samples] == ["mail-00", "mail-07", "mail-14"]
    assert json.loads(samples[0].actual_decision)["(schema)"] == "amount: '10.00' is not of type 'number'"
    markdown = render_report_markdown(gate.status(report.update.id, failures=10))
    assert "🧾 emails: 3 answers broke the response schema" in markdown
    row = [line for line in markdown.splitlines() if line.startswith("| mail-07 |")][-1]  # live got it: broken
    assert (
        row
        == "| mail-07 | **email**: Order ORD-507: EUR 17.07. | **(schema)** amount: '17.07' is not of type 'number' |"
    )
    valid(report)


def test_parallel_calls_are_compared_as_a_set_and_counted(mysql_gate, model, tmp_path):
    system = (
        "Route.\n- parallel: yes\n- escalate: furious\n- lookup_order: where is\ndefault: none\n"
        "- extract order_id: /ORD-[0-9]+/\n- extract reason: legal = lawyer; complaint\n"
    )
    tools = [
        json.loads(json.dumps(t)) for t in load_spec(ROUTER).to_config()["tools"] if t["function"]["name"] != "refund"
    ]
    spec = parse_spec(
        {
            "name": "parallel-router",
            "model": "mock-1",
            "tools": tools,
            "parallel_tool_calls": True,
            "decision": {"type": "tool_call", "fields": {"order_id": "exact", "reason": "text"}},
            "messages": [{"role": "system", "content": system}, {"history": "item.messages"}],
        }
    )
    both = [
        {"function": "escalate", "arguments": {"reason": "complaint"}},
        {"function": "lookup_order", "arguments": {"order_id": "ORD-1"}},
    ]
    rows = [
        {"item_id": "p1", "messages": [{"role": "user", "content": "I'm furious: where is ORD-1?"}], "expected": both},
        {
            "item_id": "p2",
            "messages": [{"role": "user", "content": "where is ORD-2?"}],
            "expected_decision": "lookup_order",
            "expected": {"order_id": "ORD-2"},
        },
        {"item_id": "p3", "messages": [{"role": "user", "content": "I'm furious: where is ORD-9?"}], "expected": both},
        {"item_id": "p4", "messages": [{"role": "user", "content": "hello"}], "expected_decision": "none"},
    ]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    gate = mysql_gate
    gate.register_dataset("parallel", str(tmp_path / "p.jsonl"))
    gate.map_dataset("parallel-router", "parallel", "0.5")
    (report,) = run_until_terminal(gate, [gate.submit(spec, "check")], timeout=120)
    (run,) = report.runs
    assert report.status == "PASSED" and (run.matches, run.scored) == (3, 4)
    assert run.tool_calls["parallel"] == {"expected": 2, "answered": 2, "right": 1}
    assert failing(gate, report) == ["p3"]
    (sample,) = gate.status(report.update.id).runs[0].failures
    assert sample.call["expected"] == 'escalate(reason="complaint") + lookup_order(order_id="ORD-1")'
    assert sample.call["actual"] == 'escalate(reason="complaint") + lookup_order(order_id="ORD-9")'


def test_a_decision_by_label_routes_on_labels_and_refuses_rows_with_arguments(mysql_gate, model, tmp_path):
    config = load_spec(ROUTER).to_config()
    config["decision"] = {"type": "tool_call"}
    spec = parse_spec(config)
    rows = [json.loads(line) for line in CONVERSATIONS.read_text().splitlines()]
    for r in rows:
        r.pop("expected", None)
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    gate = mysql_gate
    gate.register_dataset("labels", str(tmp_path / "labels.jsonl"))
    gate.register_dataset("support-conversations", str(CONVERSATIONS))
    gate.map_dataset("support-router", "labels", "0.75")
    (report,) = run_until_terminal(gate, [gate.submit(spec, "check")], timeout=120)
    (run,) = report.runs
    assert report.status == "PASSED" and (run.matches, run.scored) == (21, 26)
    assert run.labels["refund"]["support"] == 8 and run.labels["none"]["precision"] == 4 / 8
    gate.map_dataset("support-router", "support-conversations", "0.75")
    with pytest.raises(UsageError, match="dataset support-conversations gives expected arguments of tool calls"):
        gate.submit(spec, "check")


def test_a_malformed_conversation_is_refused_in_one_line_naming_the_row(mysql_gate, tmp_path):
    rows = [json.loads(line) for line in CONVERSATIONS.read_text().splitlines()]
    rows[3]["messages"].append({"role": "tool", "tool_call_id": "call_9", "content": "4111 1111 1111 1111"})
    (tmp_path / "bad.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DatasetError) as caught:
        mysql_gate.register_dataset("bad", str(tmp_path / "bad.jsonl"))
    message = str(caught.value)
    assert message.endswith(
        "line 4: item conv-04: column messages: turn 2: a tool turn must answer a call of the assistant turn before it"
    )
    assert "4111" not in message and "\n" not in message
    assert "bad" not in {ds.name for ds, _ in mysql_gate.list_datasets()}


def test_a_pull_request_with_malformed_or_oversized_tools_gets_one_line_each_and_nothing_staged(
    tmp_path, github, mysql_url, model
):
    gate = fast(Gate.connect(migrated(mysql_url), upgrade=True))
    ws = make_workspace(tmp_path)
    gateconfig.sync(gate, ws / "gate.yaml")
    router = yaml.safe_load((ws / "prompts" / "support-router.yaml").read_text())
    router["tools"][0]["parameters"]["$ref"] = "https://evil.example/schema.json"
    (ws / "prompts" / "support-router.yaml").write_text(yaml.safe_dump(router))
    oversized = yaml.safe_load((ws / "prompts" / "ticket-urgency.yaml").read_text())
    oversized["tools"] = [{"name": f"tool_{i}", "description": "d" * 3000} for i in range(30)]
    (ws / "prompts" / "ticket-urgency.yaml").write_text(yaml.safe_dump(oversized))
    github.add_pull(12, HEAD1, ["prompts/support-router.yaml", "prompts/ticket-urgency.yaml"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(12, HEAD1), "m" * 40, "refs/pull/12/merge")
    code, log = act(env, gate)
    assert code == 2 and "Traceback" not in log, log
    errors = [line for line in log.splitlines() if line.startswith("::error ")]
    assert len(errors) == 2, log
    assert any("prompts/support-router.yaml" in e and "tools[0].parameters.$ref" in e for e in errors), errors
    assert any("prompts/ticket-urgency.yaml" in e and "at most 64 KiB together" in e for e in errors), errors
    rows = [line for line in github.comments_on(12)[0]["body"].splitlines() if line.startswith("| prompts/")]
    assert len(rows) == 2 and "| tools\\[0\\].parameters.\\$ref | 'https" in rows[0], rows
    assert rows[1].endswith("| tools | are 91,190 bytes as JSON: at most 64 KiB together |"), rows
    assert gate.list_updates() == []
    gate.close()
