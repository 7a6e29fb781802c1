"""Issue 50.1: a generative answer decided by deterministic checks, on MariaDB with real
worker processes and the local model server: a drafter gated by checks alone is REJECTED on
"never promises a refund", the report naming the check (its pass rate, its bar) and the
items that failed it, compared with live like every kind; with checks before a judge, an
item failing a check is a MISMATCH and the judge is never called for it (counted at the
model server)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from support import judged_env
from support.judging import GOOD_REPLIES, NO_REFUND_REPLIES, live_judge, reply_spec

from gate.errors import UsageError
from gate.prompt.spec import parse_spec
from gate.report.markdown import render_report_markdown
from gate.report.text import render_text
from gate.schemas import status_schema
from gate.states import UpdateStatus
from workers.supervisor import run_until_terminal

llm = judged_env.llm  # a shared fixture
workers = judged_env.workers  # a shared fixture

CHECKS = {
    "never_promises_refund": {"not_regex": "(?i)\\brefund"},
    "names_the_ticket": {"icontains": {"column": "topic"}},
    "short": {"max_words": 40},
}
TOPICS = (("I was charged twice for order {i}", "order"), ("I forgot my password, account {i}", "password"))


def drafter(rules: str):
    return parse_spec(
        {
            "name": "drafter",
            "model": "mock-1",
            "messages": [{"role": "system", "content": rules}, {"role": "user", "content": "{{ item.ticket }}"}],
            "decision": {"type": "checks", "checks": CHECKS},
        }
    )


def write_tickets(path: Path, n: int = 20, parcels: int = 0) -> Path:
    """``n`` tickets, a refund one and a password one in turn (``topic``: a word the reply
    names), after ``parcels`` parcel tickets no reply names."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "ticket", "topic"])
        for i in range(parcels):
            w.writerow([f"p{i}", "ok", f"Where is my parcel {i}?", "parcel"])
        for i in range(n):
            text, topic = TOPICS[i % 2]
            w.writerow([f"t{i}", "ok", text.format(i=i), topic])
    return path


NAMING = (  # every reply names its ticket's topic; the refund one promises a refund
    "Draft a reply.\n"
    "- reply when charged: We are sorry about your order: a refund has been issued.\n"
    "- reply otherwise: You can reset your password from the sign-in page."
)
NOT_PROMISING = (
    "Draft a reply.\n"
    "- reply when charged: We are looking into your order and will write back today.\n"
    "- reply otherwise: You can reset your password from the sign-in page."
)


def in_process(gate):
    return lambda update_id: run_until_terminal(gate, [update_id], timeout=60)[0]


def test_a_drafter_gated_by_checks_alone_is_rejected_naming_the_check_and_its_items(mysql_gate, llm, workers, tmp_path):
    gate = mysql_gate
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", parcels=2)))
    gate.map_dataset("drafter", "tickets", "0.9", bars={"early_stop": False})
    first = in_process(gate)(gate.submit(drafter(NOT_PROMISING), "apply"))
    assert first.status == UpdateStatus.APPLIED, first.update.reason
    assert (first.runs[0].matches, first.runs[0].scored) == (20, 22)  # no reply names a parcel

    typo = drafter(NAMING)
    typo = parse_spec(
        {**typo.to_config(), "decision": {"type": "checks", "checks": {"c": {"contains": {"column": "tpic"}}}}}
    )
    with pytest.raises(UsageError) as refused:  # a column no row has: refused, not every item failed
        gate.submit(typo)
    assert "tpic" in str(refused.value) and "\n" not in str(refused.value), refused.value

    bars = {"early_stop": False, "min_check_rate": {"never_promises_refund": 1, "short": 0.9}, "max_broken": 0}
    gate.map_dataset("drafter", "tickets", "0.4", bars=bars)
    update_id = gate.submit(drafter(NAMING))
    workers(gate, llm)
    report = gate.wait(update_id, timeout=90)
    assert report.status == UpdateStatus.REJECTED, report.update.reason
    reason = report.update.reason
    assert "tickets min_check_rate[never_promises_refund] 54.5% < bar 100%" in reason, reason
    run = report.runs[0]
    assert (run.matches, run.scored) == (10, 22)
    states = {(c["bar"], c["label"]): (c["state"], c["value"]) for c in run.checks}
    assert states[("min_check_rate", "never_promises_refund")] == ("fail", "54.5%")
    assert states[("min_check_rate", "short")] == ("pass", "100.0%")
    assert states[("max_broken", None)][0] == "fail"  # compared with live: the 10 refund tickets broke
    assert run.comparison is not None and (run.comparison["fixed"], run.comparison["broken"]) == (0, 10)
    rates = {c["check"]: (c["passed"], c["failed"]) for c in run.check_rates["checks"]}
    assert rates == {"names_the_ticket": (20, 2), "never_promises_refund": (12, 10), "short": (22, 0)}
    text = render_text(report)
    assert "checks passed: names_the_ticket 90.9% (20/22), never_promises_refund 54.5% (12/22)" in text, text
    bar_line = "bar items passing the check never_promises_refund 100%: 54.5% [fail] — 10 of 22 items failed it"
    assert bar_line in text, text  # the bar by its plain name, as the tables name it
    assert "broken t0: expected ok, live said We are looking into your order" in text, text  # the items, named
    assert "a refund has been issued. — failed check never_promises_refund" in text, text
    assert "p0: expected ok, got You can reset your password" in text, text  # failing as live did: its check
    p0 = next(line for line in text.splitlines() if "p0:" in line)
    assert p0.count("You can reset your password") == 1, p0  # the answer is the decision: said once
    assert "— failed check names_the_ticket" in text, text
    markdown = render_report_markdown(report)
    assert "| tickets | never\\_promises\\_refund | 12 | 10 | 54.5% |" in markdown, markdown
    doc = report.to_dict()
    Draft202012Validator(status_schema()).validate(doc)
    assert doc["runs"][0]["check_rates"]["checks"][1]["passed"] == 12


def test_checks_before_a_judge_spare_the_judge_every_item_that_fails_one(mysql_gate, llm, workers, tmp_path):
    gate = mysql_gate
    live_judge(gate, tmp_path, in_process(gate), rows=40)  # the floors ask 30 human items
    judged = []
    llm.on_request = lambda body: judged.append(1) if "Judge the support reply" in str(body["messages"][0]) else None
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 30)))
    gate.map_dataset("reply", "tickets", "0.6", bars={"sentinels": 0, "early_stop": False})
    checked = {"pass": ["good"], "checks": {"never_promises_refund": {"not_regex": "(?i)\\brefund"}}}
    update_id = gate.submit(reply_spec(GOOD_REPLIES, **checked))
    workers(gate, llm)
    report = gate.wait(update_id, timeout=90)
    assert report.status == UpdateStatus.REJECTED, report.update.reason
    run = report.runs[0]
    assert (run.matches, run.scored) == (15, 30)  # the 15 refund tickets fail the check, unjudged
    assert len(judged) == 15  # the judge called for the password tickets only
    accuracy = next(c for c in run.checks if c["bar"] == "min_accuracy")
    assert "the share of items passing every check, then the judge" in accuracy["note"], accuracy
    assert run.check_rates["checks"] == [{"check": "never_promises_refund", "passed": 15, "failed": 15, "rate": 0.5}]
    text = render_text(report)
    assert "failed check never_promises_refund" in text, text
    # the same prompt without the refund promise: every item judged, none spared
    judged.clear()
    again = gate.submit(reply_spec(NO_REFUND_REPLIES, **checked))
    second = gate.wait(again, timeout=90)
    assert second.runs[0].check_rates["checks"][0]["failed"] == 0
    assert len(judged) == 15  # the password answers' grading reused; the 15 new replies judged
