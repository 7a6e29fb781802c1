"""Numbers a reader can hold the gate to (issue 24, frictions 2 and 4): an accuracy printed
beside a bar never rounds onto the bar's other side (26/30 against 0.8667 is 86.667%, not
86.7% "< bar 86.67%"); a bar prints as written (86.67%, not 86.6700%); a FAILED run's text
says as many scored items as its JSON."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from fractions import Fraction
from types import SimpleNamespace

import pytest

from gate.records import Update
from gate.records.pinned import Pinned
from gate.report.markdown import render_report_markdown
from gate.report.text import render_text
from gate.report.update import RunReport, UpdateReport
from gate.verdict.bar_checks import check
from gate.verdict.bars import Bars
from gate.verdict.scoring import format_bar, format_pct
from gate.verdict.update_outcome import update_end

T0 = dt.datetime(2026, 12, 1, 12, 0, 0)


@pytest.mark.parametrize(
    "bar, shown",
    [
        ("0.8667", "86.67%"),
        ("0.86700", "86.7%"),
        ("0.85", "85%"),
        ("0.8", "80%"),
        ("1", "100%"),
        ("0", "0%"),
        ("0.123456789", "12.3456789%"),
    ],
)
def test_a_bar_prints_as_written(bar, shown):
    assert format_bar(Decimal(bar)) == shown


def test_the_issue_s_case_reads_right():
    metrics = {"matches": 26, "scored": 30, "total": 30, "confusion": {}}
    (accuracy,) = check(Bars(min_accuracy=Decimal("0.8667")), metrics)
    assert (accuracy.value, accuracy.limit, accuracy.state) == ("86.667%", "86.67%", "fail")
    run = SimpleNamespace(
        status="DONE",
        dataset_name="hard",
        metrics=metrics,
        min_accuracy=Decimal("0.8667"),
        pinned=Pinned.of({"bars": None}),
        reason=None,
    )
    assert update_end("check", [run]) == ("REJECTED", "missed: hard 86.667% < bar 86.67%")
    assert format_pct(26, 30) == "86.7%"  # no bar to stand against: one decimal, as before


def _shown(text: str) -> Fraction:
    return Fraction(Decimal(text.rstrip("%"))) / 100


@pytest.mark.parametrize("bar", ["0.8667", "0.9", "0.95", "0.333", "0.6667", "0.875", "0.1", "0.99999"])
def test_no_printed_accuracy_sits_on_the_wrong_side_of_its_bar(bar):
    limit = Fraction(Decimal(bar))
    for scored in range(1, 81):
        for matches in range(scored + 1):
            shown = _shown(format_pct(matches, scored, Decimal(bar)))
            assert (shown >= limit) == (Fraction(matches, scored) >= limit), (matches, scored, bar)


def _report(status: str, run_status: str, scored: int, errors: int, matches: int = 0) -> UpdateReport:
    run = RunReport(
        run_id=1,
        dataset="hard",
        bar=Decimal("0.8667"),
        status=run_status,
        total=scored + errors,
        scored=scored,
        matches=matches,
        errors=errors,
        pending=0,
        accuracy=matches / scored if scored else None,
        passed=None if run_status != "DONE" else False,
        reason="30 of 30 items of hard could not be scored" if errors else None,
        row_count=scored + errors,
        content_hash=None,
        source_version=None,
        source_uri="hard.csv",
        metrics={"total": scored + errors, "scored": scored, "matches": matches, "errors": errors},
    )
    update = Update(7, "p1", "check", status, {"name": "p1"}, "h" * 64, 1, {}, "could not be scored", T0, T0, T0)
    return UpdateReport(update, [run], {})


def test_a_failed_run_s_text_counts_the_scored_items_its_json_does():
    report = _report("FAILED", "ERROR", scored=0, errors=30)
    text = render_text(report)
    counted = int(re.search(r"hard: .* (\d+)/30 scored", text).group(1))
    assert counted == report.to_dict()["runs"][0]["scored"] == 0, text
    assert "0/30 scored, 30 errors" in text


def test_the_markdown_row_sits_on_the_right_side_of_the_bar():
    text = render_report_markdown(_report("REJECTED", "DONE", scored=30, errors=0, matches=26))
    assert "| hard | 86.667% (26/30) | 86.67% | ❌ fail |" in text
