"""A decision with checks on both surfaces (issues 49.1, 50.1): its "Check by check" section
is one of its kind's (``gate.kinds.sections.CHECK_RATES``), rendered by the comment and the
status page from the same description; a failing item names the checks it failed on both;
a dataset without labels (``fields.unlabelled``: a checks or judged prompt's) gets no
empty "expected" column in either. Built by the real ``run_report`` from metrics as
finalize writes them."""

from __future__ import annotations

import re
from dataclasses import replace

from test_report_tool_calls import ATTEMPTS, T0, run

from gate.records import ItemSample, RunCounts, UnstableItem, Update
from gate.records.pinned import Pinned
from gate.report.markdown import render_report_markdown
from gate.report.text import render_text
from gate.report.update import UpdateReport, run_report
from gate.service import pages, views

CHECKS = {"never_promises_refund": {"not_regex": "(?i)\\brefund"}, "short": {"max_words": 40}}
JUDGE = {"type": "judge", "judge": "reply-judge", "pass": ["good"], "checks": CHECKS}


def metrics(failed: int) -> dict:
    return {
        "total": 10,
        "scored": 9,
        "matches": 9 - failed,
        "mismatches": failed,
        "errors": 1,
        "pending": 0,
        "invalid": 0,
        "accuracy": (9 - failed) / 9,
        "confusion": {},
        "checks": {
            "items": 9,
            "checks": [
                {"check": "never_promises_refund", "passed": 9 - failed, "failed": failed},
                {"check": "short", "passed": 9, "failed": 0},
            ],
        },
    }


def samples() -> list[ItemSample]:
    """Rows without a label (expected ""): one failing a check, one whose call failed."""
    refund = {"checks_failed": ["never_promises_refund"]}
    return [
        ItemSample("t-1", "", "A refund is on its way.", "MISMATCH", "A refund is on its way.", None, judge=refund),
        ItemSample("t-2", "", None, "ERROR", None, "timeout after 30 s"),
    ]


def report(decision: dict, unstable: list[UnstableItem] | None = None) -> UpdateReport:
    base = run()
    trials = {"trials": {"n": 3, "rule": "majority", "k": None, "needed": 2}} if unstable else {}
    bars = {"min_check_rate": {"never_promises_refund": "1"}}
    pinned = Pinned.of({"decision": decision, "bars": bars, **trials})
    checked = replace(base, pinned=pinned, metrics={**metrics(1), "unstable": len(unstable or ())})
    counts = RunCounts(total=10, match=8, mismatch=1, error=1)
    update = Update(7, "drafter", "check", "REJECTED", {"name": "drafter"}, "ab" * 32, 2, {}, "missed", T0, T0, T0)
    return UpdateReport(update, [run_report(checked, counts, samples(), {}, [], unstable)], ATTEMPTS)


def page_html(r: UpdateReport) -> str:
    return pages.page("update.html.j2", None, v=views.update_view(r, 20), samples=20).body.decode()


def headers(html: str) -> list[str]:
    return re.findall(r"<th[^>]*>([^<]*)</th>", html)


def test_a_checks_decisions_check_by_check_section_and_failed_checks_on_both_surfaces():
    r = report({"type": "checks", "checks": CHECKS})
    markdown, html = render_report_markdown(r), page_html(r)
    assert "**Check by check**" in markdown
    assert "| conversations | never\\_promises\\_refund | 8 | 1 | 88.9% |" in markdown, markdown
    assert '<h2 id="sec-check_rates" data-section="check_rates">Check by check</h2>' in html, html
    assert re.search(r"never_promises_refund</span></td>\s*<td class=\"num\">8</td>", html), html
    row = next(line for line in markdown.splitlines() if line.startswith("| t-1 "))
    assert row.endswith("| **never\\_promises\\_refund** |"), row  # the check it failed, named
    assert '<div><b class="bad mono">never_promises_refund</b></div>' in html
    assert "(invalid)" not in markdown and "(invalid)" not in html  # never a judge's word for a check


def test_checks_before_a_judge_name_the_check_an_item_failed_not_a_judge_verdict():
    r = report(JUDGE)
    markdown, html = render_report_markdown(r), page_html(r)
    assert "**Check by check**" in markdown and ">Check by check</h2>" in html
    row = next(line for line in markdown.splitlines() if line.startswith("| t-1 "))
    assert "**failed check** | never\\_promises\\_refund |" in row, row
    assert '<b class="bad">failed check</b></td><td class="cell">never_promises_refund</td>' in html, html
    assert "(invalid)" not in markdown and "(invalid)" not in html


def test_no_empty_expected_column_for_a_dataset_without_labels():
    wavering = [UnstableItem("t-3", "", "good", "MATCH", ["good", "bad", "good"])]
    for decision in ({"type": "checks", "checks": CHECKS}, JUDGE):
        r = report(decision, wavering)
        markdown, html = render_report_markdown(r), page_html(r)
        assert "t-3" in markdown and "t-3" in html  # the wavering item is listed, without an expected column
        assert "expected" not in headers(html), (decision["type"], headers(html))
        tables = [line for line in markdown.splitlines() if line.startswith("| item |")]
        assert tables and not any("expected" in line for line in tables), tables
        assert "unstable t-3: trials good, bad, good" in render_text(r)  # no "expected ," either
