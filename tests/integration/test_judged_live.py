"""Issue 46.4: a judged (``pass:``) candidate is compared with live on the same items by the
same judge version, on MariaDB with real worker processes and the local model server:
live's answers graded once (its applied run's verdicts reused, or a baseline run staged and
then reused by later runs of the same judging), fixed, broken, McNemar and the paired
interval as the label kinds report them; ``max_broken`` and ``max_drop`` hold judged
mappings; with no live version they are n/a, never a pass."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from support import judged_env
from support.judging import NO_REFUND_REPLIES, live_judge, reply_spec

from gate.report.markdown import render_report_markdown
from gate.report.text import render_text
from gate.schemas import status_schema
from gate.states import UpdateStatus
from workers.supervisor import run_until_terminal

llm = judged_env.llm  # a shared fixture
workers = judged_env.workers  # a shared fixture

# Live drafts refund and password replies the judge passes: 22 of 30 (73.3 %); the candidate
# (NO_REFUND_REPLIES) password and parcel ones: 20 of 30 (66.7 %), breaking the 10 refunds
# live got right and fixing the 8 parcels it got wrong.
LIVE_REPLIES = (
    "Draft a reply to the ticket.\n"
    "- reply when refund*, charged: We are sorry: a refund has been issued to your card.\n"
    "- reply when password: You can reset your password from the sign-in page.\n"
    "- reply otherwise: Thanks for writing; we will look into it."
)
TOPICS = (
    ("I was charged twice for order {i}", 10),
    ("I forgot my password, account {i}", 12),
    ("Where is my parcel {i}?", 8),
)


def in_process(gate):
    return lambda update_id: run_until_terminal(gate, [update_id], timeout=60)[0]


def write_tickets(path: Path, extra: int = 0) -> Path:
    """10 refund, 12 password and 8 parcel tickets (and ``extra`` more password ones)."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "ticket"])
        n = 0
        for topic, count in TOPICS:
            for _ in range(count + (extra if "password" in topic else 0)):
                w.writerow([f"t{n}", "good", topic.format(i=n)])
                n += 1
    return path


def _live_applied(gate, tmp_path):
    live_judge(gate, tmp_path, in_process(gate))
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv")))
    gate.map_dataset("reply", "tickets", "0.6", bars={"sentinels": 0, "early_stop": False})
    first = in_process(gate)(gate.submit(reply_spec(LIVE_REPLIES), "apply"))
    assert first.status == UpdateStatus.APPLIED, first.update.reason
    assert (first.runs[0].matches, first.runs[0].scored) == (22, 30)
    assert first.runs[0].comparison is None  # nothing to compare the first version with


def test_a_judged_candidate_worse_than_live_is_rejected_on_broken_items_and_the_drop(
    mysql_gate, llm, workers, service, tmp_path
):
    """The issue's case: live judged 73.3 %, the candidate 66.7 % as judged; with
    ``max_broken 0`` and ``max_drop 2`` it is REJECTED naming the broken items and the drop
    (before: FAILED "could not be scored"), live's answers graded once: its applied run's
    verdicts by the same judge version are reused (no call for live)."""
    gate = mysql_gate
    _live_applied(gate, tmp_path)
    bars = {"sentinels": 0, "early_stop": False, "max_broken": 0, "max_drop": 2}
    gate.map_dataset("reply", "tickets", "0.6", bars=bars)
    update_id = gate.submit(reply_spec(NO_REFUND_REPLIES))
    workers(gate, llm)
    report = gate.wait(update_id, timeout=90)
    assert report.status == UpdateStatus.REJECTED, report.update.reason
    reason = report.update.reason
    assert reason.startswith("missed: tickets max_broken 10 > bar 0; inconclusive: tickets max_drop −6.7 pts ["), reason
    run = report.runs[0]
    assert (run.matches, run.scored) == (20, 30)
    cmp = run.comparison
    assert cmp is not None
    assert (cmp["fixed"], cmp["broken"], cmp["paired"]) == (8, 10, 30)
    assert cmp["live_accuracy"] == pytest.approx(22 / 30) and cmp["accuracy"] == pytest.approx(20 / 30)
    assert cmp["live_run_id"] is not None and not cmp["live_scored_now"]  # live's applied run, reused
    assert cmp["p_value"] is not None and cmp["difference_interval"][0] < -0.02
    states = {c["bar"]: c["state"] for c in run.checks}
    assert states["max_broken"] == "fail" and states["max_drop"] == "fail" and states["min_accuracy"] == "pass"
    assert run.broken and {b.item_id for b in run.broken} <= {f"t{i}" for i in range(10)}  # the refund tickets
    assert report.spend["calls_made"] <= 30 * 2  # the candidate and its judge: nothing for live
    text = render_text(report)
    assert "vs live (update 2): 73.3% [55.6–85.8] → 66.7% [48.8–80.8]; fixed 8, broken 10" in text, text
    assert "McNemar p = 0.815" in text and "broken t0: expected good, live said good, candidate said bad" in text
    markdown = render_report_markdown(report)
    row = next(x for x in markdown.splitlines() if x.startswith("| tickets | 73.3% → 66.7% |"))
    assert "| 8 / 10 | 0.815 (not significant) |" in row, row
    assert "**Broken items** — live answered right, this candidate wrong (first 5 of 10)" in markdown, markdown
    doc = report.to_dict()
    Draft202012Validator(status_schema()).validate(doc)
    assert doc["runs"][0]["comparison"]["broken"] == 10
    with service.client("read") as web:
        page = web.get(f"/updates/{update_id}").text
    table = page.split("Against the live version, on the same items", 1)[1].split("</table>", 1)[0]
    cells = [c.split("<", 1)[0].strip() for c in table.split('<td class="num">')[1:]]
    assert cells[0] == "73.3%" and cells[1] == "66.7%" and cells[-2:] == ["8", "10"], cells


def test_live_graded_on_a_new_dataset_version_is_staged_once_and_reused(mysql_gate, llm, workers, tmp_path):
    """A dataset version live was never run on: a baseline run grades live's answers with
    the candidate's judge (its calls counted in the update's bound), and a later candidate
    on the same version reuses that run: live and its judge are not paid again."""
    gate = mysql_gate
    _live_applied(gate, tmp_path)
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets2.csv", extra=3)))  # a new version
    gate.map_dataset("reply", "tickets", "0.6", bars={"sentinels": 0, "early_stop": False, "max_broken": 0})
    first = gate.submit(reply_spec(NO_REFUND_REPLIES))
    workers(gate, llm)
    report = gate.wait(first, timeout=90)
    assert report.status == UpdateStatus.REJECTED, report.update.reason
    cmp = report.runs[0].comparison
    assert cmp is not None and cmp["live_scored_now"] and (cmp["fixed"], cmp["broken"], cmp["paired"]) == (8, 10, 33)
    assert cmp["live_accuracy"] == pytest.approx(25 / 33)
    assert report.update.limits["calls_bound"] == 33 * 2 + 33 * 2  # candidate + judge, live + judge on live
    again = gate.submit(reply_spec(NO_REFUND_REPLIES.replace("Draft", "Write")))
    second = gate.wait(again, timeout=90)
    assert second.status == UpdateStatus.REJECTED, second.update.reason
    assert second.runs[0].comparison["live_run_id"] == cmp["live_run_id"]  # the same graded answers
    assert second.spend["calls_made"] <= 33  # its candidate's replies at most: live and its grading not paid again


def test_a_judged_prompt_with_no_live_version_has_no_live_figures_and_no_live_pass(mysql_gate, llm, tmp_path):
    gate = mysql_gate
    live_judge(gate, tmp_path, in_process(gate))
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv")))
    bars = {"sentinels": 0, "early_stop": False, "max_broken": 0, "max_drop": 2}
    gate.map_dataset("reply", "tickets", "0.6", bars=bars)
    report = in_process(gate)(gate.submit(reply_spec(LIVE_REPLIES)))
    assert report.status == UpdateStatus.PASSED, report.update.reason
    run = report.runs[0]
    assert run.comparison is None
    states = {c["bar"]: (c["state"], c["note"]) for c in run.checks}
    assert states["max_broken"][0] == "n/a" and states["max_drop"][0] == "n/a"
    assert "no live version" in states["max_broken"][1]
    assert "nothing to measure for: drop against live, items broken against live" in report.update.reason


def test_a_bar_the_kind_cannot_compute_is_refused_at_map_sync_and_submit(mysql_gate, llm, tmp_path):
    """Issue 46.4: a bar the prompt's kind cannot compute (``bars_computable``) is refused in
    one line naming the bar and the kind: at `dataset map`, at `sync` (and its dry run) for
    a declared mapping; one the gate holds already is warned of by the dry run and refuses
    the submit in one line (not FAILED "could not be scored" after the calls)."""
    from gate.db import transaction
    from gate.errors import UsageError
    from gate.gateconfig import diff, sync
    from gate.gateconfig.parse import parse_config
    from gate.store.datasets import upsert_mapping

    gate = mysql_gate
    _live_applied(gate, tmp_path)
    why = (
        "reply × tickets: bar max_loss_rate cannot be computed for a judged prompt (graded by a judge, decision pass:)"
    )
    with pytest.raises(UsageError) as refused:
        gate.map_dataset("reply", "tickets", "0.6", bars={"max_loss_rate": "0.1", "max_broken": 0})
    assert str(refused.value).startswith(why) and "\n" not in str(refused.value)
    declared = parse_config(
        {
            "datasets": {"tickets": {"source": str(tmp_path / "tickets.csv")}},
            "prompts": {
                "reply": [{"dataset": "tickets", "min_accuracy": 0.6, "judge_corrected": True, "max_inconsistent": 0.2}]
            },
        },
        "gate.yaml",
    )
    for plan in (diff, sync):
        with pytest.raises(UsageError, match=r"^reply × tickets: bar max_inconsistent cannot be computed for a judged"):
            plan(gate, declared)
    ds = gate.get_dataset("tickets")
    transaction(
        gate.engine, lambda conn: upsert_mapping(conn, "reply", ds.id, Decimal("0.6"), {"max_loss_rate": "0.1"})
    )
    kept = parse_config(
        {"datasets": {"tickets": {"source": str(tmp_path / "tickets.csv")}}, "prompts": {}}, "gate.yaml"
    )
    lines = [line for line in diff(gate, kept).lines() if line.startswith("warning:")]
    assert lines == [f"warning: {why}: drop it from the mapping; until then its submits are refused"]
    with pytest.raises(UsageError) as submit:
        gate.submit(reply_spec(NO_REFUND_REPLIES))
    assert str(submit.value) == f"{why}: drop it from the mapping"
    assert [u.prompt_name for u in gate.list_updates()].count("reply") == 1  # nothing staged


def test_with_early_stop_on_the_worse_judged_candidate_is_rejected_too(mysql_gate, llm, workers, tmp_path):
    """The mapping's defaults (early stop on, sentinels mixed in): never a pass, never FAILED."""
    gate = mysql_gate
    _live_applied(gate, tmp_path)
    gate.map_dataset("reply", "tickets", "0.6", bars={"max_broken": 0, "max_drop": 2})
    update_id = gate.submit(reply_spec(NO_REFUND_REPLIES))
    workers(gate, llm)
    report = gate.wait(update_id, timeout=90)
    assert report.status == UpdateStatus.REJECTED, report.update.reason
    assert "max_broken" in report.update.reason, report.update.reason
