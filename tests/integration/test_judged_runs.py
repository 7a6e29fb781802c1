"""Judged runs on MariaDB with the local model server and real worker processes
(gate/prompt/judge.py): a reply-drafting candidate graded by a judge passes or fails on
its pass rate, with both answers kept and the judge's figures pinned and reported; a judge
without a live version is refused at submit; a pull request that lowers a judge's agreement
is rejected on its own gate; a judge that drifts mid-run fails the update on its sentinels;
a compared prompt with no live version is never applied (46.1); a comparison with live
never counts a position-biased judge's disagreeing orders as not lost, and above
max_inconsistent is inconclusive (46.5); the spend cap holds with the judge's calls counted."""

from __future__ import annotations

from dataclasses import fields

import pytest
from jsonschema import Draft202012Validator
from sqlalchemy import func, select
from support import judged_env
from support.judging import (
    NO_REFUND_REPLIES,
    WEAK_REPLIES,
    judge_spec,
    live_judge,
    pair_judge_spec,
    reply_spec,
    write_pairs,
    write_tickets,
)

from gate.errors import NotFound, UsageError
from gate.prompt.spec import parse_spec
from gate.records.pinned import Pinned
from gate.report.markdown import render_markdown, render_report_markdown
from gate.report.text import render_text
from gate.schemas import status_schema
from gate.states import UpdateStatus
from gate.store.schema import prompt_run_item, prompt_run_sentinel
from workers.supervisor import run_until_terminal

llm = judged_env.llm  # a shared fixture
workers = judged_env.workers  # a shared fixture


def in_process(gate):
    return lambda update_id: run_until_terminal(gate, [update_id], timeout=60)[0]


def test_a_judged_candidate_passes_and_another_fails_on_their_pass_rates(mysql_gate, llm, workers, tmp_path):
    gate = mysql_gate
    live_judge(gate, tmp_path, in_process(gate), disagree=14)  # agrees with the humans on 186 of 200
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 60)))
    gate.map_dataset("reply", "tickets", "0.9", bars={"sentinels": 0, "early_stop": False})  # every figure, whole
    good = gate.submit(reply_spec(), source={"key": "good"})
    weak = gate.submit(reply_spec(WEAK_REPLIES), source={"key": "weak"})
    workers(gate, llm)
    passed, failed = gate.wait(good, timeout=60), gate.wait(weak, timeout=60)
    assert passed.status == UpdateStatus.PASSED, passed.update.reason
    assert failed.status == UpdateStatus.REJECTED and failed.update.reason == "missed: tickets 33.3% < bar 90%"
    run = failed.runs[0]
    assert set(run.pinned) <= {f.name for f in fields(Pinned)}  # every key submit pins is a field of the record
    pinned = run.pinned["judge"]
    assert (pinned["name"], pinned["version"]) == ("reply-judge", 1) and len(pinned["config_hash"]) == 64
    assert "provider" not in pinned  # where the judge's calls go stays with the workers
    assert pinned["agreement"]["n"] == 200 and pinned["agreement"]["agreed"] == 186
    view = run.judge
    assert view["agreement_line"].startswith("agrees with humans on 93% of 200 items, sensitivity")
    assert view["agreement_line"].endswith("beyond chance 0.86 (Cohen's κ)")  # the statistic's name last
    assert view["agreement"]["sensitivity"] == pytest.approx(93 / 100) and view["pass_rate"] == pytest.approx(1 / 3)
    assert view["corrected"]["interval"][0] < view["corrected"]["estimate"] < view["corrected"]["interval"][1]
    # both answers kept: the candidate's reply and the judge's verdict; failing items show both
    item = run.failures[0]
    assert item.raw_output == "Thanks for writing; we will look into it." and item.actual_decision == "bad"
    assert item.judge["label"] == "bad" and item.judge["said"] == "bad"
    text = render_text(failed)
    assert "judge reply-judge v1: agrees with humans on 93% of 200 items" in text
    assert "corrected for the judge's error rates" in text and "— judge: bad" in text
    Draft202012Validator(status_schema()).validate(failed.to_dict())
    # every call went through the model server and is counted: the judge's evaluation, then each
    # candidate's replies and verdicts (a verdict both ask for may be answered once)
    roles = run.judge["calls"]
    assert roles["candidate"]["calls"] == 60 and 0 < roles["judge"]["calls"] <= 60 and roles["sentinel"]["calls"] == 0
    assert llm.stats()["requests"] == 200 + passed.spend["calls_made"] + failed.spend["calls_made"]


def test_a_judge_without_a_live_version_is_refused_at_submit(mysql_gate, llm, tmp_path):
    gate = mysql_gate
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 6)))
    gate.map_dataset("reply", "tickets", "0.9")
    with pytest.raises(UsageError, match=r"^judge reply-judge has no live version") as err:
        gate.submit(reply_spec())
    assert "\n" not in str(err.value)
    gate.map_dataset("ticket-kind", "tickets", "0.5")  # a live prompt that is not a judge
    kind = parse_spec(
        {
            "name": "ticket-kind",
            "model": "mock-1",
            "labels": ["good", "bad"],
            "messages": [
                {"role": "system", "content": "default: good"},
                {"role": "user", "content": "{{ item.ticket }}"},
            ],
        }
    )
    assert in_process(gate)(gate.submit(kind, "apply")).status == UpdateStatus.APPLIED
    with pytest.raises(UsageError, match="prompt ticket-kind is not a judge"):
        gate.submit(reply_spec(judge="ticket-kind"))
    live_judge(gate, tmp_path, in_process(gate))
    gate.unmap_dataset("reply-judge", "reply-labels")  # its evaluation no longer stands on a mapped dataset
    with pytest.raises(UsageError, match="judge reply-judge has no live version applied through its mapped datasets"):
        gate.submit(reply_spec())
    assert [u.prompt_name for u in gate.list_updates()] == ["reply-judge", "ticket-kind"]  # nothing staged for reply


def test_a_pull_request_that_lowers_a_judges_agreement_below_its_bar_is_rejected(mysql_gate, llm, workers, tmp_path):
    gate = mysql_gate
    live_judge(gate, tmp_path, in_process(gate))
    lenient = judge_spec(rules="Judge the support reply.\n- judge pass good: refund*, thanks\n- judge otherwise: bad")
    update_id = gate.submit(lenient, "apply", {"pr": 7, "repo": "acme/prompts"})
    workers(gate, llm)
    report = gate.wait(update_id, timeout=60)
    assert report.status == UpdateStatus.REJECTED, report.update.reason  # settled early: most items never called
    assert report.update.reason.startswith("stopped early: reply-labels: ")
    assert gate.live("reply-judge").version == 1  # the judge's gate held: candidates are still judged by v1


def test_a_judge_that_drifts_mid_run_fails_the_update_on_its_sentinels(mysql_gate, llm, workers, tmp_path):
    gate = mysql_gate
    live_judge(gate, tmp_path, in_process(gate))
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 400)))
    gate.map_dataset("reply", "tickets", "0.3")
    llm.drift_judges(60)  # the judge's model changes behind its API after 60 more verdicts
    update_id = gate.submit(reply_spec())
    workers(gate, llm)
    report = gate.wait(update_id, timeout=90)
    (run,) = report.runs
    assert report.status == UpdateStatus.FAILED and run.status == "ERROR"
    assert report.update.reason.startswith("tickets: judge drifted: agreed on ")
    assert report.update.reason.endswith(" sentinels, pinned 100 %")
    sentinels = run.judge["sentinels"]
    assert sentinels["drifted"] and sentinels["agreed"] < sentinels["judged"] and sentinels["planned"] == 40
    assert run.stopped > 0  # stopped mid-run: the rest was never judged by the drifted judge
    assert run.stop and run.stop["kind"] == "judge_drift", run.stop  # by the drift alarm, not another stop
    with gate.engine.connect() as conn:
        calls = conn.execute(
            select(func.sum(prompt_run_sentinel.c.calls)).where(prompt_run_sentinel.c.run_id == run.run_id)
        ).scalar()
    assert calls == sentinels["judged"]  # each sentinel called afresh, once


def test_a_compared_prompt_with_no_live_version_is_never_applied(mysql_gate, llm, tmp_path):
    """Issue 46.1: no live version, no comparison: the run is not judged, the update FAILED."""
    gate = mysql_gate
    gate.register_dataset("pairs", str(write_pairs(tmp_path / "pairs.csv", 60)))
    gate.map_dataset("pair-judge", "pairs", "0.5")
    assert in_process(gate)(gate.submit(pair_judge_spec(), "apply")).status == UpdateStatus.APPLIED
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 25)))
    gate.map_dataset("reply", "tickets", "0.8", bars={"max_loss_rate": 0.05, "sentinels": 0})
    report = in_process(gate)(gate.submit(reply_spec(judge="pair-judge", compare="live"), "apply"))
    why = "no live version to compare with: the first version of a compared prompt cannot be judged by comparison"
    assert report.status == UpdateStatus.FAILED, report.update.reason
    assert report.update.reason.startswith(f"could not be scored: tickets min_accuracy, max_loss_rate: {why}")
    assert "\n" not in report.update.reason
    assert report.runs[0].judge["pairwise"]["live"] is False
    with pytest.raises(NotFound):  # nothing applied
        gate.live("reply")
    text = render_text(report)
    assert why in text and "✅" not in text and "tickets: n/a vs bar 80% [FAIL]" in text
    comment = render_markdown([report])
    assert "| tickets | n/a | 80% | ❌ fail |" in comment and "✅" not in comment
    checks = {c["bar"]: c for c in report.to_dict()["runs"][0]["checks"]}
    assert checks["min_accuracy"]["state"] == "fail" and checks["min_accuracy"]["reason"] == "unjudged"
    Draft202012Validator(status_schema()).validate(report.to_dict())


def test_pairwise_with_a_position_biased_judge_is_inconclusive(mysql_gate, llm, workers, tmp_path):
    """Issue 46.5: a position-biased judge's disagreeing orders never count as not lost, and
    above max_inconsistent (default 10 %) the run is inconclusive."""
    gate = mysql_gate
    live_judge(gate, tmp_path, in_process(gate))  # the first version is graded: nothing to compare with yet
    gate.register_dataset("pairs", str(write_pairs(tmp_path / "pairs.csv", 60)))
    gate.map_dataset("pair-judge", "pairs", "0.5")  # a lenient bar lets a position-biased judge go live
    assert in_process(gate)(gate.submit(pair_judge_spec(bias=40), "apply")).status == UpdateStatus.APPLIED
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 90)))
    gate.map_dataset("reply", "tickets", "0.5", bars={"sentinels": 0, "early_stop": False})
    first = in_process(gate)(gate.submit(reply_spec(), "apply"))
    assert first.status == UpdateStatus.APPLIED, first.update.reason
    update_id = gate.submit(reply_spec(judge="pair-judge", compare="live"))
    workers(gate, llm)
    report = gate.wait(update_id, timeout=60)
    pairwise = report.runs[0].judge["pairwise"]
    assert pairwise["live"] and pairwise["compared"] == 90 and pairwise["losses"] == 0
    assert 15 < pairwise["inconsistent"] < 60  # about 40 % of pairs get "A" in both orders
    with gate.engine.connect() as conn:
        items = conn.execute(
            select(prompt_run_item.c.actual_decision, prompt_run_item.c.verdict, prompt_run_item.c.judge).where(
                prompt_run_item.c.run_id == report.runs[0].run_id
            )
        ).all()
    inconsistent = [judge for outcome, _, judge in items if outcome == "inconsistent"]
    assert len(inconsistent) == pairwise["inconsistent"]
    assert all(j["orders"][0]["better"] != j["orders"][1]["better"] for j in inconsistent)  # the orders disagreed
    assert all(j["orders"][0]["label"] == j["orders"][1]["label"] == "A" for j in inconsistent)  # A whatever came first
    ties = sum(1 for outcome, _, _ in items if outcome == "tie")
    assert pairwise["ties"] == ties + len(inconsistent) and pairwise["wins"] + pairwise["ties"] == 90
    n = len(inconsistent)
    assert report.status == UpdateStatus.REJECTED, report.update.reason  # was PASSED: the defect of 46.5
    said = f"{n} of 90 compared items position-inconsistent ("
    assert said in report.update.reason and "> max_inconsistent 10%: the judge cannot order these answers" in (
        report.update.reason
    )
    assert said in render_text(report)


def test_a_worse_candidate_under_a_judge_biased_on_the_slice_it_loses_is_not_passed(mysql_gate, llm, workers, tmp_path):
    """Issue 46.5: the candidate loses only the refund tickets, and the judge is position-
    biased on exactly those: counted as ties they would pass it; they never count."""
    gate = mysql_gate
    live_judge(gate, tmp_path, in_process(gate))
    gate.register_dataset("pairs", str(write_pairs(tmp_path / "pairs.csv", 60)))
    gate.map_dataset("pair-judge", "pairs", "0.5")
    biased = pair_judge_spec(bias=100, bias_when="charged")  # "A" in both orders on every refund ticket
    assert in_process(gate)(gate.submit(biased, "apply")).status == UpdateStatus.APPLIED
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 60)))
    gate.map_dataset("reply", "tickets", "0.9", bars={"sentinels": 0, "early_stop": False})
    assert in_process(gate)(gate.submit(reply_spec(), "apply")).status == UpdateStatus.APPLIED
    update_id = gate.submit(reply_spec(NO_REFUND_REPLIES, "pair-judge", compare="live"))
    workers(gate, llm)
    report = gate.wait(update_id, timeout=60)
    pairwise = report.runs[0].judge["pairwise"]
    assert (pairwise["compared"], pairwise["inconsistent"], pairwise["losses"]) == (60, 20, 0)
    assert report.status == UpdateStatus.REJECTED, report.update.reason
    said = (
        "20 of 60 compared items position-inconsistent (33.3%) > max_inconsistent 10%: "
        "the judge cannot order these answers"
    )
    assert "missed: tickets 66.7% < bar 90%" in report.update.reason and said in report.update.reason
    text = render_text(report)
    assert said in text and "not lost on 40 of 60 compared; 20 position-inconsistent never count" in text
    assert "tickets: 66.7% vs bar 90% [FAIL]" in text
    comment = render_markdown([report])
    assert "| tickets | 66.7% | 90% | ❌ fail |" in comment and "✅" not in comment


def test_the_spend_cap_holds_with_judge_calls_counted(mysql_gate, llm, workers, tmp_path):
    gate = mysql_gate
    live_judge(gate, tmp_path, in_process(gate))
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 300)))
    gate.map_dataset("reply", "tickets", "0.1")
    gate.set_limit("max_calls_per_update", "250")
    update_id = gate.submit(reply_spec(), reuse=False)
    assert gate.status(update_id).spend["calls_bound"] == 300 + 300 + 40  # replies, verdicts, sentinels
    before = llm.stats()["requests"]
    workers(gate, llm, 2)
    report = gate.wait(update_id, timeout=60)
    calls = llm.stats()["requests"] - before
    assert report.status == UpdateStatus.FAILED and calls <= 250, (calls, report.update.reason)
    assert report.update.reason.startswith("spend cap reached: max_calls_per_update 250: 250 calls made")
    roles = report.runs[0].judge["calls"]
    assert roles["judge"]["calls"] > 0 and report.spend["calls_made"] == calls


MOSTLY_GOOD_REPLIES = (  # two tickets in three get a reply the judge passes: 40 of 60
    "Draft a reply to the ticket.\n"
    "- reply when refund*, charged: We are sorry: a refund has been issued to your card.\n"
    "- reply when password: You can reset your password from the sign-in page.\n"
    "- reply otherwise: Thanks for writing; we will look into it."
)


def test_a_corrected_pass_rate_is_the_figure_shown_against_its_bar_everywhere(
    mysql_gate, llm, workers, service, tmp_path
):
    """Issue 46.3: with judge_corrected the bar compares the corrected rate (69.4%); every
    output shows that figure first against the bar, the pass rate as judged (66.7%, below
    the bar) labelled beside it, never "66.7% vs bar 68% [pass]"."""
    gate = mysql_gate
    live_judge(gate, tmp_path, in_process(gate), disagree=14)  # sensitivity = specificity = 0.93
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 60)))
    bars = {"sentinels": 0, "early_stop": False, "judge_corrected": True}
    gate.map_dataset("reply", "tickets", "0.68", bars=bars)
    update_id = gate.submit(reply_spec(MOSTLY_GOOD_REPLIES))
    workers(gate, llm)
    report = gate.wait(update_id, timeout=60)
    assert report.status == UpdateStatus.PASSED, report.update.reason  # (2/3 + 0.93 − 1) / 0.86 = 69.4% ≥ 68%
    run = report.runs[0]
    assert (run.matches, run.scored) == (40, 60)
    text = render_text(report)
    line = next(x for x in text.splitlines() if x.startswith("  tickets: "))
    assert line.startswith("  tickets: 69.4% vs bar 68% [pass]"), line
    assert "as judged 66.7%" in line and "66.7% vs bar" not in text
    markdown = render_report_markdown(report)
    assert "| tickets | 69.4% (as judged 66.7%, 40/60) | 68% | ✅ pass |" in markdown, markdown
    comment = render_markdown([report])  # the pull request's comment
    assert "| tickets | 69.4% (as judged 66.7%, 40/60) | 68% | ✅ pass |" in comment and "| 66.7%" not in comment
    doc = report.to_dict()
    Draft202012Validator(status_schema()).validate(doc)
    assert doc["runs"][0]["figure"] == {"of": "corrected", "shown": "69.4%", "as_judged": "as judged 66.7%"}
    assert list(doc["runs"][0])[0] == "figure"  # the JSON's first word on a run
    with service.client("read") as web:
        page = web.get(f"/updates/{update_id}").text
    assert "<strong>69.4%</strong>" in page and "as judged 66.7%, 40/60" in page
    assert "<strong>66.7%</strong>" not in page
    judge = run.judge["name"]
    assert f' · judged by <a href="/prompts/{judge}">{judge}</a>' in page  # the way to its judge (issue 49.7)
