"""The report a reviewer can trust, on MariaDB: the live version is the example prompt,
applied through the gate; a candidate built to break exactly K items of the regression set
and fix J others is compared with it on the same items. The report lists exactly those K
items, the J fixed count and McNemar's exact p-value; ``max_broken: 0`` rejects it although
its accuracy clears the bar; with no live version the bar is n/a and the update applies."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from jsonschema import Draft202012Validator

from gate.mockllm import decide
from gate.prompt.spec import load_spec, parse_spec
from gate.prompt.templating import render
from gate.report.markdown import render_report_markdown
from gate.report.text import render_text
from gate.schemas import status_schema
from workers.supervisor import run_until_terminal

EXAMPLE = Path(__file__).resolve().parents[2] / "prompts-example"
DATASET = EXAMPLE / "datasets" / "urgency-regression.csv"


def valid_json(report) -> None:
    """`status --json` of this report keeps its documented contract."""
    Draft202012Validator(status_schema()).validate(json.loads(json.dumps(report.to_dict())))


def mock_answer(spec, row: dict) -> str:
    """The label the local model server gives this row under this prompt (its rules)."""
    return decide([{"role": m.role, "content": render(m.content, row)} for m in spec.messages])[0]


def candidate_from(live):
    """The live prompt with its rules edited: 'charged twice' and 'crash*' dropped (breaks
    items the live version gets right, and fixes one it gets wrong), 'blank page' added
    (fixes one)."""
    config = live.to_config()
    system = config["messages"][0]["content"]
    assert "charged twice, " in system and "crash*, " in system
    system = (
        system.replace("charged twice, ", "").replace("crash*, ", "").replace("- urgent: ", "- urgent: blank page, ")
    )
    return parse_spec({**config, "messages": [{**config["messages"][0], "content": system}, *config["messages"][1:]]})


def test_candidate_against_live_on_the_same_items(mysql_gate, model):
    gate = mysql_gate
    gate.register_dataset("urgency-regression", str(DATASET))
    gate.map_dataset("ticket-urgency", "urgency-regression", "0.5", bars={"max_broken": 0})
    live = load_spec(EXAMPLE / "prompts" / "ticket-urgency.yaml")

    # no live version yet: max_broken cannot be computed, is shown n/a and does not block
    (first,) = run_until_terminal(gate, [gate.submit(live, "apply")], timeout=120)
    assert first.status == "APPLIED", first.update.reason
    (run,) = first.runs
    (broken_bar,) = [c for c in run.checks if c["bar"] == "max_broken"]
    assert (broken_bar["state"], broken_bar["value"]) == ("n/a", None)
    assert run.comparison is None and run.baseline_note == "no live version yet"
    assert "nothing to measure for: items broken against live" in first.update.reason
    assert "n/a — not applied: no live version yet" in render_report_markdown(first)

    # the candidate, compared item by item with the live version's answers
    candidate = candidate_from(live)
    rows = list(csv.DictReader(DATASET.open()))
    live_right = {r["item_id"] for r in rows if mock_answer(live, r) == r["expected_decision"]}
    cand_right = {r["item_id"] for r in rows if mock_answer(candidate, r) == r["expected_decision"]}
    broken, fixed = sorted(live_right - cand_right), sorted(cand_right - live_right)
    assert (len(broken), len(fixed)) == (7, 2)  # K and J of this candidate

    # --full: every item called, the whole comparison (by default the 7th broken item would
    # settle max_broken 0 before the rest were called: tests/integration/test_early_stop.py)
    (second,) = run_until_terminal(gate, [gate.submit(candidate, "check", full=True)], timeout=120)
    (run,) = second.runs
    assert run.matches == len(cand_right) and run.matches / run.scored >= 0.5  # accuracy alone would pass
    assert second.status == "REJECTED"
    assert "urgency-regression max_broken 7 > bar 0" in second.update.reason
    c = run.comparison
    assert (c["broken"], c["fixed"], c["paired"]) == (7, 2, len(rows))
    assert c["live_accuracy"] == len(live_right) / len(rows) and c["accuracy"] == len(cand_right) / len(rows)
    assert abs(c["p_value"] - 92 / 512) < 1e-12  # 2 · P(X ≤ 2), X ~ Bin(9, ½) = 2 · 46/512
    assert c["p_value"] == 2 * sum(math.comb(9, i) for i in range(3)) / 2**9 and not c["significant"]
    assert sorted(b.item_id for b in gate.status(second.update.id, failures=50).runs[0].broken) == broken
    assert all(b.live_decision == b.expected_decision != b.candidate_decision for b in run.broken)

    shown = render_report_markdown(second)
    assert "**Broken items** — live answered right, this candidate wrong (first 5 of 7):" in shown
    text, markdown = render_text(second), render_report_markdown(gate.status(second.update.id, failures=50), samples=50)
    assert "; fixed 2, broken 7\n" in text and "McNemar p = 0.18: it is not significant at 5%" in text
    assert "| 2 / 7 | 0.18 (not significant) |" in markdown
    assert "**Broken items** — live answered right, this candidate wrong (7):" in markdown
    for item_id in broken:
        assert f"| {item_id} |" in markdown
    assert "| items broken against live | 0 | 7 | ❌ fail |" in markdown

    # the live config itself, submitted again: it agrees with itself on every item
    (again,) = run_until_terminal(gate, [gate.submit(live, "check")], timeout=120)
    c = again.runs[0].comparison
    assert again.status == "PASSED" and (c["fixed"], c["broken"], c["paired"], c["p_value"]) == (0, 0, len(rows), 1.0)
    for report in (first, second, again):
        valid_json(report)


def test_the_live_version_is_scored_on_a_dataset_version_it_never_saw(mysql_gate, model, tmp_path):
    """The dataset changed since the live version was applied: the candidate's update scores
    the live version on the new version too (a baseline run), calling only the rows whose
    requests are new — the rest are the live version's answers from when it was applied."""
    gate = mysql_gate
    data = tmp_path / "urgency-regression.csv"
    data.write_text(DATASET.read_text())
    gate.register_dataset("urgency-regression", str(data))
    gate.map_dataset("ticket-urgency", "urgency-regression", "0.5", bars={"max_broken": 0})
    live = load_spec(EXAMPLE / "prompts" / "ticket-urgency.yaml")
    (first,) = run_until_terminal(gate, [gate.submit(live, "apply")], timeout=120)
    assert first.status == "APPLIED", first.update.reason

    rows = list(csv.DictReader(data.open()))
    rows[0]["text"] += " (edited)"  # one changed row
    rows.append(
        {
            "item_id": "urg-new-1",
            "expected_decision": "urgent",
            "subject": "Charged twice",
            "text": "We were charged twice for the same order.",
        }
    )  # a new row live gets right
    with data.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    gate.refresh_dataset("urgency-regression")

    candidate = candidate_from(live)
    live_right = {r["item_id"] for r in rows if mock_answer(live, r) == r["expected_decision"]}
    cand_right = {r["item_id"] for r in rows if mock_answer(candidate, r) == r["expected_decision"]}
    before = model.stats()["requests"]
    (second,) = run_until_terminal(gate, [gate.submit(candidate, "check", full=True)], timeout=120)
    calls = model.stats()["requests"] - before

    assert calls == len(rows) + 2  # every candidate item; for live only the 2 new requests
    (run,) = second.runs
    c = run.comparison
    assert c is not None and c["live_version"] == 1
    assert (c["broken"], c["fixed"]) == (len(live_right - cand_right), len(cand_right - live_right)) == (8, 2)
    assert c["live_accuracy"] == len(live_right) / len(rows)
    assert sorted(b.item_id for b in gate.status(second.update.id, failures=50).runs[0].broken) == sorted(
        live_right - cand_right
    )
    assert second.status == "REJECTED" and "max_broken 8 > bar 0" in second.update.reason
    assert c["live_scored_now"] and "this update scored it too" in render_report_markdown(second)
    valid_json(second)


def test_cost_from_the_price_table_and_its_bar(mysql_gate, model):
    """With a price for the model, the run's cost is its token sums at that price, exact;
    a cost bar below it rejects. Without a price the bar cannot be computed and fails: the
    pull request chooses the model, so naming an unpriced one must not switch it off."""
    from decimal import Decimal

    from gate.records import Price

    gate = mysql_gate
    gate.register_dataset("urgency-regression", str(DATASET))
    gate.map_dataset("ticket-urgency", "urgency-regression", "0.5", bars={"max_cost_per_1k_items": "0.0001"})
    live = load_spec(EXAMPLE / "prompts" / "ticket-urgency.yaml")
    (unpriced,) = run_until_terminal(gate, [gate.submit(live, "check")], timeout=120)
    assert unpriced.status == "REJECTED" and unpriced.runs[0].cost is None
    assert "max_cost_per_1k_items: no price for model 'gpt-4o-mini'" in unpriced.update.reason
    (bar,) = [c for c in unpriced.runs[0].checks if c["bar"] == "max_cost_per_1k_items"]
    assert (bar["state"], bar["value"]) == ("fail", None)

    gate.set_price(Price("gpt-4o-mini", Decimal("0.15"), Decimal("0.60")))
    (priced,) = run_until_terminal(gate, [gate.submit(live, "check", reuse=False)], timeout=120)
    (run,) = priced.runs
    spent = (run.calls["prompt_tokens"] * Decimal("0.15") + run.calls["completion_tokens"] * Decimal("0.60")) / 10**6
    assert run.calls["prompt_tokens"] > 0 and Decimal(run.cost["usd"]) == spent
    assert Decimal(run.cost["per_1k_items"]) == round(spent * 1000 / run.total, 9) > Decimal("0.0001")  # shown
    assert priced.status == "REJECTED" and "max_cost_per_1k_items" in priced.update.reason
    valid_json(priced)
