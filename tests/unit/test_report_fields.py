"""The report's sections for a fields decision, slices, protected items and accepted breaks:
golden files (Markdown and text), built by the real ``run_report`` from a run's metrics as
finalize and reconcile write them; untrusted slice values, item ids and reasons stay inert;
`status --json` of it keeps the schema."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

from jsonschema import Draft202012Validator
from support.action_harness import HEAD1, HOSTILE, REPO, unescaped_pipes
from test_report_markdown import check_golden

from gate.records import FlipSample, ItemSample, Run, RunCounts, Update
from gate.records.pinned import Pinned
from gate.report.markdown import render_report_markdown
from gate.report.text import render_text
from gate.report.update import UpdateReport, run_report
from gate.schemas import status_schema

T0 = dt.datetime(2024, 5, 1, 12, 0, 0)
DECISION = {
    "type": "fields",
    "fields": {
        "amount": {"type": "number", "tolerance": "0.01"},
        "category": {"type": "label", "labels": ["billing", "shipping", "other"]},
        "order_id": {"type": "exact"},
    },
}


def expected(order, category, amount):
    return json.dumps(
        {"amount": amount, "category": category, "order_id": order}, sort_keys=True, separators=(",", ":")
    )


def metrics(hostile: str = "") -> dict:
    """What finalize and reconcile write for a candidate that gets amount wrong on 3 of 40
    items (one of them protected, one an accepted break) and one category."""
    return {
        "total": 40,
        "scored": 40,
        "matches": 36,
        "mismatches": 4,
        "errors": 0,
        "pending": 0,
        "invalid": 1,
        "accuracy": 0.9,
        "confusion": {},
        "fields": {
            "items": 40,
            "fields": [
                {"field": "amount", "type": "number", "right": 37, "wrong": 3, "missing": 1},
                {"field": "category", "type": "label", "right": 38, "wrong": 2, "missing": 1},
                {"field": "order_id", "type": "exact", "right": 39, "wrong": 1, "missing": 1},
            ],
            "confusion": {
                "category": {
                    "billing": {"billing": 20, "(missing)": 1},
                    "shipping": {"shipping": 14, "billing": 1},
                    "other": {"other": 4},
                }
            },
        },
        "flips": {"fixed": 1, "broken": 3, "both_right": 35, "both_wrong": 1, "paired": 40},
        "live": {"matches": 38, "scored": 40, "update_id": 7, "run_id": 3, "live_version": 2},
        "baseline_note": None,
        "baseline_error": None,
        "field_flips": {
            "amount": {"paired": 40, "live_right": 40, "fixed": 0, "broken": 3},
            "category": {"paired": 40, "live_right": 38, "fixed": 1, "broken": 1},
            "order_id": {"paired": 40, "live_right": 39, "fixed": 0, "broken": 0},
        },
        "slices": {
            "column": "channel",
            "min_items": 20,
            "too_many": False,
            "compared": True,
            "slices": [
                {"value": "email", "items": 30, "matches": 29, "live_matches": 29, "fixed": 1, "broken": 1},
                {"value": "chat" + hostile, "items": 8, "matches": 6, "live_matches": 8, "fixed": 0, "broken": 2},
                {"value": None, "items": 2, "matches": 1, "live_matches": 1, "fixed": 0, "broken": 0},
            ],
        },
        "protected": {
            "items": 2,
            "broken": 1,
            "samples": [
                {
                    "item_id": "mail-007" + hostile,
                    "expected_decision": expected("ORD-7", "billing", 40.0),
                    "live_decision": expected("ORD-7", "billing", 40.0),
                    "candidate_decision": json.dumps({"category": "billing", "order_id": "ORD-7"}, sort_keys=True),
                    "candidate_output": '{"order_id": "ORD-7", "category": "billing"}',
                }
            ],
        },
        "accepted_breaks": [
            {
                "item": "mail-012",
                "reason": "two totals in the email: either is fair" + hostile,
                "commit": HEAD1,
                "state": "broke",
            },
            {"item": "mail-020", "reason": "the customer misspelt the order id", "commit": None, "state": "stale"},
        ],
    }


def report(hostile: str = "") -> UpdateReport:
    pinned = {
        "decision": DECISION,
        "bars": {
            "min_field_accuracy": {"amount": "0.95"},
            "slice_by": "channel",
            "min_slice_accuracy": "0.8",
            "max_broken": 1,
            "protected": ["mail-001"],
            "accept_breaks": [
                {"item": "mail-012", "reason": "x", "commit": HEAD1},
                {"item": "mail-020", "reason": "y"},
            ],
        },
    }
    run = Run(
        1,
        41,
        1,
        "support-emails",
        "/ws/d.jsonl",
        {},
        "DONE",
        Decimal("0.85"),
        40,
        "3f" * 32,
        "sha256:" + "9e" * 32,
        None,
        T0,
        None,
        1,
        metrics(hostile),
        None,
        T0,
        T0,
        T0,
        5,
        Pinned.of(pinned),
        "candidate",
        2,
    )
    failures = [
        ItemSample(
            "mail-003",
            expected("ORD-3", "billing", 12.5),
            json.dumps({"amount": 12.0, "category": "billing", "order_id": "ORD-3"}, sort_keys=True),
            "MISMATCH",
            '{"order_id": "ORD-3", "amount": 12}',
            None,
        ),
        ItemSample(
            "mail-009",
            expected("ORD-9", "other", 3.0),
            "(not a JSON object)",
            "MISMATCH",
            "Sorry, I cannot help with that.",
            None,
        ),
    ]
    broken = [
        FlipSample(
            "mail-003",
            expected("ORD-3", "billing", 12.5),
            expected("ORD-3", "billing", 12.5),
            json.dumps({"amount": 12.0, "category": "billing", "order_id": "ORD-3"}, sort_keys=True),
            '{"order_id": "ORD-3", "amount": 12}',
        )
    ]
    update = Update(
        41,
        "support-extract",
        "check",
        "REJECTED",
        {"name": "support-extract", "model": "gpt-4o-mini", "messages": [], "decision": DECISION},
        "ab" * 32,
        2,
        {"repo": REPO, "pr": 12, "sha": HEAD1, "path": "prompts/support-extract.yaml"},
        "missed: support-emails: 1 protected item broke; support-emails min_field_accuracy[amount] 92.5% < bar 95%",
        T0,
        T0,
        T0,
    )
    counts = RunCounts(total=40, match=36, mismatch=4)
    attempts = {
        "retried_items": 0,
        "extra_attempts": 0,
        "max_attempt": 1,
        "throttled_calls": 0,
        "throttle_wait_seconds": 0,
        "rate_limited_calls": 0,
    }
    return UpdateReport(update, [run_report(run, counts, failures, {}, broken)], attempts)


def test_golden_fields_report_markdown():
    text = render_report_markdown(report())
    head = text.split("| dataset | accuracy |")[0]
    assert "🛡️ **Protected items broken**" in head  # listed first, before the figures
    check_golden("fields_report.md", text)


def test_golden_fields_report_text():
    text = render_text(report())
    assert text.splitlines()[1].startswith("  PROTECTED ITEMS BROKEN in support-emails")
    check_golden("fields_report.txt", text + "\n")


def test_untrusted_values_stay_inert_in_the_new_sections():
    """A slice value, an item id and a reason with pipes, HTML, links, mentions and a line
    break: every table row keeps its header's cells, nothing renders as HTML or a link."""
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
    for hostile_row in ("mail-007", "chat", "two totals"):
        assert any(hostile_row in line and "x\\|@" in line for line in text.splitlines()), hostile_row
    plain = render_text(report(HOSTILE))
    assert "\nnext line" not in plain and plain.count("x|@") >= 3


def test_status_json_of_the_new_sections_keeps_the_schema():
    document = json.loads(json.dumps(report(HOSTILE).to_dict()))
    Draft202012Validator(status_schema()).validate(document)
    run = document["runs"][0]
    assert [f["field"] for f in run["fields"]["fields"]] == ["amount", "category", "order_id"]
    assert run["fields"]["most_wrong"] == ["amount", "category", "order_id"]
    assert run["fields"]["fields"][0]["live"] == {
        "accuracy": 1.0,
        "interval": run["fields"]["fields"][0]["live"]["interval"],
        "fixed": 0,
        "broken": 3,
    }
    assert [s["judged"] for s in run["slices"]["slices"]] == [True, False, False]
    assert run["failures"][0]["wrong_fields"] == [
        {"field": "amount", "expected": 12.5, "actual": 12.0, "missing": False}
    ]
    assert [w["missing"] for w in run["failures"][1]["wrong_fields"]] == [True, True, True]
    assert run["protected"]["samples"][0]["wrong_fields"] == [
        {"field": "amount", "expected": 40.0, "actual": None, "missing": True}
    ]
    assert [(a["item"], a["state"]) for a in run["accepted_breaks"]] == [("mail-012", "broke"), ("mail-020", "stale")]
