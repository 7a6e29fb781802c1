"""The report of a prompt decided by its tool call, over conversations: per argument its
accuracy over the items that expect it, the function's confusion matrix, the marked
answers and parallel calls, the failing items' expected and actual calls side by side
with the conversation's last turns; a strict schema's breaks. Built by the real
``run_report`` from metrics as finalize writes them; the model's and the dataset's values
stay inert; `status --json` keeps the schema."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from decimal import Decimal

from jsonschema import Draft202012Validator
from support.action_harness import HOSTILE, unescaped_pipes

from gate.prompt.spec import parse_spec
from gate.records import ItemSample, Run, RunCounts, Update
from gate.records.pinned import Pinned
from gate.report.markdown import render_report_markdown
from gate.report.text import render_text
from gate.report.update import UpdateReport, run_report
from gate.schemas import status_schema
from gate.verdict.update_outcome import run_checks

T0 = dt.datetime(2024, 5, 1, 12, 0, 0)
TOOLS = [
    {
        "name": "refund",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}}},
    },
    {"name": "lookup_order", "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}},
]
SPEC = parse_spec(
    {
        "name": "router",
        "model": "m",
        "tools": TOOLS,
        "messages": [{"role": "system", "content": "route"}, {"history": "item.messages"}],
        "decision": {
            "type": "tool_call",
            "fields": {"order_id": "exact", "amount": {"type": "number", "tolerance": 0.01}},
        },
    }
)
DECISION = SPEC.decision.to_dict()


ATTEMPTS = {
    "retried_items": 0,
    "extra_attempts": 0,
    "max_attempt": 1,
    "throttled_calls": 0,
    "throttle_wait_seconds": 0,
    "rate_limited_calls": 0,
}


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def metrics() -> dict:
    """A candidate that routes 19 of 20 right and drops the cents of 3 of 8 refunds."""
    return {
        "total": 20,
        "scored": 20,
        "matches": 16,
        "mismatches": 4,
        "errors": 0,
        "pending": 0,
        "invalid": 0,
        "accuracy": 0.8,
        "confusion": {},
        "fields": {
            "items": 20,
            "fields": [
                {"field": "amount", "type": "number", "compared": 8, "right": 5, "wrong": 3, "missing": 0},
                {"field": "function", "type": "label", "compared": 20, "right": 19, "wrong": 1, "missing": 0},
                {"field": "order_id", "type": "exact", "compared": 16, "right": 16, "wrong": 0, "missing": 0},
            ],
            "confusion": {
                "function": {
                    "refund": {"refund": 8},
                    "lookup_order": {"lookup_order": 8},
                    "none": {"none": 3, "lookup_order": 1},
                }
            },
        },
        "tool_calls": {
            "arguments_not_json": 0,
            "arguments_off_schema": 1,
            "parallel": {"expected": 2, "answered": 2, "right": 1},
        },
    }


def run(pinned_bars: dict | None = None) -> Run:
    pinned = {"decision": DECISION, "bars": pinned_bars or {"min_field_accuracy": {"amount": "0.9", "order_id": "1"}}}
    return Run(
        1,
        41,
        1,
        "conversations",
        "/ws/c.jsonl",
        {},
        "DONE",
        Decimal("0.75"),
        20,
        "3f" * 32,
        None,
        None,
        T0,
        None,
        1,
        metrics(),
        None,
        T0,
        T0,
        T0,
        5,
        Pinned.of(pinned),
        "candidate",
        2,
    )


def failures(hostile: str = "") -> list[ItemSample]:
    turns = [{"role": "user", "text": "Refund ORD-7" + hostile}, {"role": "assistant", "text": "lookup_order({})"}]
    return [
        ItemSample(
            "c-7" + hostile,
            canonical({"function": "refund", "order_id": "ORD-7", "amount": 12.5}),
            canonical({"function": "refund", "order_id": "ORD-7" + hostile, "amount": 12}),
            "MISMATCH",
            '→ refund({"amount": 12})',
            None,
            turns=turns,
        ),
        ItemSample(
            "c-9",
            "none",
            canonical(
                {"(arguments)": "off schema: amount: 'x' is not of type 'number'", "function": "refund", "amount": "x"}
            ),
            "MISMATCH",
            None,
            None,
        ),
    ]


def report(hostile: str = "") -> UpdateReport:
    update = Update(41, "router", "check", "REJECTED", SPEC.to_config(), "ab" * 32, 2, {}, "missed", T0, T0, T0)
    runs = [run_report(run(), RunCounts(total=20, match=16, mismatch=4), failures(hostile), {}, [])]
    return UpdateReport(update, runs, ATTEMPTS)


def test_each_argument_is_judged_over_the_items_that_expect_it():
    (r,) = report().runs
    amount = next(f for f in r.fields["fields"] if f["field"] == "amount")
    assert (amount["right"], amount["of"], amount["accuracy"]) == (5, 8, 5 / 8)
    checks = {(c["bar"], c["label"]): c for c in r.checks}
    assert checks[("min_field_accuracy", "amount")]["value"] == "62.5%"
    assert checks[("min_field_accuracy", "amount")]["state"] == "fail"
    assert checks[("min_field_accuracy", "order_id")]["state"] == "pass"  # 16 of 16, not 16 of 20
    assert r.tool_calls["arguments_most_wrong"] == [{"field": "amount", "wrong": 3, "of": 8}]
    unknown = [c for c in run_checks(run({"min_field_accuracy": {"reason": "0.5"}})) if c.name == "min_field_accuracy"]
    assert [c.state for c in unknown] == ["fail"]  # a field the decision does not have


def test_a_failing_items_calls_side_by_side_with_its_last_turns():
    (r,) = report().runs
    first, second = r.failures
    assert first.call == {
        "expected": 'refund(amount=12.5, order_id="ORD-7")',
        "actual": 'refund(amount=12, order_id="ORD-7")',
        "problem": None,
    }
    assert (
        second.call["problem"] == "off schema: amount: 'x' is not of type 'number'"
        and second.call["expected"] == "none"
    )
    markdown = render_report_markdown(report())
    # side by side: the conversation's last turns, only the argument that differs, marked (issue 49)
    assert "| item | input | changed: expected → answered |" in markdown
    assert "| c-7 | **user**: Refund ORD-7<br>**assistant**: lookup\\_order({}) | **amount** 12.5 → 12 |" in markdown
    assert "**(arguments)** off schema: amount: 'x' is not of type 'number'" in markdown
    assert "🛠️ conversations: arguments not JSON 0, off their function's schema 1" in markdown
    assert (
        "several calls expected on 2 items (1 right), made on 2; arguments most often wrong: amount (3 of 8)"
        in markdown
    )
    assert "function: expected ↓ · answered →" in markdown and "| none | 1 | 3 | 0 |" in markdown
    text = render_text(report())
    assert '    c-7: expected refund(amount=12.5, order_id="ORD-7"), got refund(amount=12, order_id="ORD-7")' in text
    assert "      user: Refund ORD-7" in text
    assert "tool calls: arguments not JSON 0, off their schema 1" in text


def test_a_decision_by_label_shows_the_call_the_answer_made():
    update = Update(41, "router", "check", "REJECTED", {}, "ab" * 32, 2, {}, None, T0, T0, T0)
    decision = {"type": "tool_call", "labels": ["refund", "lookup_order", "none"]}
    labelled = replace(run(), pinned=Pinned.of({"decision": decision}))
    sample = ItemSample(
        "c-1", "refund", "lookup_order", "MISMATCH", 'Let me check.\n→ lookup_order({"order_id": "ORD-1"})', None
    )
    (r,) = UpdateReport(update, [run_report(labelled, RunCounts(total=20), [sample], {}, [])], ATTEMPTS).runs
    assert r.failures[0].call == {
        "expected": "refund",
        "actual": 'lookup_order({"order_id": "ORD-1"})',
        "problem": None,
    }


def test_the_models_and_the_rows_values_stay_inert():
    text = render_report_markdown(report(HOSTILE))
    cells = None
    for line in text.splitlines():
        if not line.startswith("|"):
            cells = None
            continue
        if cells is None:
            cells = unescaped_pipes(line)
        assert unescaped_pipes(line) == cells, line
    assert "<img" not in text and "](https://evil" not in text and "\nnext line" not in text
    assert "\nnext line" not in render_text(report(HOSTILE))


def test_status_json_with_calls_turns_and_a_schema_keeps_the_schema():
    document = json.loads(json.dumps(report(HOSTILE).to_dict()))
    document["runs"][0]["schema"] = {"broken": 2}
    Draft202012Validator(status_schema()).validate(document)
    assert document["runs"][0]["failures"][0]["turns"][0]["role"] == "user"
