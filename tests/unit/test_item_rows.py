"""Items side by side (issue 49.2): a failing item's input (a conversation as its turns), the
candidate's answer, only the fields that differ (``amount 12.5 → 12``), a judge's verdict and
its reason in columns of their own; all of it bounded and inert in the comment (Markdown)
and on the status page (HTML, autoescaped), built by the real ``run_report``."""

from __future__ import annotations

from dataclasses import replace

from support.action_harness import HOSTILE, unescaped_pipes
from test_report_tool_calls import failures, run
from test_report_tool_calls import report as tool_report

from gate.records import ItemSample, RunCounts
from gate.report import item_rows
from gate.report.markdown import render_report_markdown
from gate.report.update import UpdateReport, run_report
from gate.service import pages, views

LONG = "word " * 200


def hostile_report() -> UpdateReport:
    samples = [replace(f, input={"messages": [{"role": "user", "content": HOSTILE + LONG}]}) for f in failures(HOSTILE)]
    base = tool_report(HOSTILE)
    return replace(base, runs=[run_report(run(), RunCounts(total=20, match=16, mismatch=4), samples, {}, [])])


def page_html(report: UpdateReport) -> str:
    return pages.page("update.html.j2", None, v=views.update_view(report, 20), samples=20).body.decode()


def test_only_the_fields_that_differ_are_shown_and_marked():
    (row, problem) = [item_rows.failing_row(f) for f in tool_report().runs[0].failures]
    assert row["changes"] == [{"field": "amount", "before": "12.5", "after": "12", "missing": False}]
    assert problem["changes"][0]["field"] == "(arguments)" and problem["changes"][0]["before"] is None
    html = page_html(tool_report())
    assert '<b class="mono">amount</b> <del>12.5</del> → <ins>12</ins>' in html


def test_a_hostile_input_stays_bounded_and_inert_on_both_surfaces():
    report = hostile_report()
    markdown = render_report_markdown(report)
    rows = [line for line in markdown.splitlines() if line.startswith("| c-")]
    assert len(rows) == 2 and all(unescaped_pipes(line) == 4 for line in rows), rows  # item | input | changed
    assert "**user**: x\\|@" in rows[1] and "&lt;img src=x&gt;" in rows[1]  # c-9's input: its conversation
    assert "<img" not in markdown and "\nnext line" not in markdown
    assert max(len(line) for line in rows) < 1200  # the input's lines cut (item_rows.LINE)
    html = page_html(report)
    assert "<img" not in html and "&lt;img src=x&gt;" in html
    assert "word " * 40 not in html  # bounded


def test_a_judged_items_verdict_and_reason_are_columns_of_their_own():
    judged = ItemSample(
        "t-1", "good", "bad", "MISMATCH", "We will look into it.", None, judge={"label": "bad", "said": "bad: vague"}
    )
    row = item_rows.failing_row(judged)
    assert (row["verdict"], row["reason"], row["answer"]) == ("bad", "bad: vague", "We will look into it.")
    assert item_rows.failing_row(replace(judged, judge={"label": "bad", "said": "bad"}))["reason"] is None


def test_a_conversation_is_drawn_as_turns_on_the_dataset_page():
    value = {"messages": [{"role": "user", "content": f"line {n}"} for n in range(20)]}
    turns = item_rows.turns_of(value)
    assert turns[0] == {"role": "user", "text": "line 0"} and len(turns) == item_rows.MOST_TURNS + 1
    assert turns[-1] == {"role": "…", "text": "8 more turns"}
    assert item_rows.turns_of({"text": "no conversation"}) == []


def test_the_pages_of_a_runs_items():
    assert views.items_pages(20, 1, 45) == {"first": 0, "page": 1, "previous": None, "next": 2, "of": 3}
    assert views.items_pages(20, 9, 45) == {"first": 40, "page": 3, "previous": 2, "next": None, "of": 3}
    assert views.items_pages(20, 1, 0)["of"] == 1
    assert views.items_pages(100, 99, 10**6)["of"] == views.MOST_ITEMS // 100  # bounded: the report reads them all
