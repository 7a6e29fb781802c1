"""Issue 49.4: the figures a reader sees agree with one another, on the comment, the status
page's view and the terminal's report — one count of calls saved, "on the same items" on the
items both sides scored (and how many), no test statistic where nothing was compared, the
summary row's result the accuracy bar's own with the failing bar named in plain words in the
headline, and a chart whose rows each carry their own bar."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from types import SimpleNamespace

from test_report_markdown import _run, _update

from gate.report.markdown import mermaid_chart, render_report_markdown
from gate.report.text import render_text, spend_line
from gate.report.update import UpdateReport, comparison
from gate.service.views import update_view
from gate.verdict.reasons import plain_bar, plain_miss

# live scored 16 items; the candidate stopped after 4, of which it got 0 right and live 3
STOPPED_FLIPS = {
    "matches": 0,
    "scored": 4,
    "flips": {"fixed": 0, "broken": 3, "both_right": 0, "both_wrong": 1, "paired": 4},
    "live": {"matches": 13, "scored": 16, "update_id": 7, "run_id": 9, "live_version": 2},
}


def test_on_the_same_items_compares_only_the_items_both_scored():
    c = comparison(STOPPED_FLIPS)
    assert c["paired"] == 4 and c["live_scored"] == 16 and c["scored"] == 4
    assert c["live_accuracy"] == 3 / 4 and c["accuracy"] == 0  # live on the 4, not its 13 of 16 (81.2 %)
    assert c["delta_points"] == c["difference_points"] == -75.0
    run = _run("d", "0.8", 0, 4, compared=c)
    report = UpdateReport(_update(5, "p", "REJECTED"), [run], {})
    text = render_report_markdown(report)
    assert "75.0% → 0.0% (on the 4 items both scored)" in text and "81.2%" not in text
    assert "vs live (update 7) on the 4 items both scored: 75.0%" in render_text(report)


def test_a_whole_comparison_does_not_say_how_many():
    c = comparison({**STOPPED_FLIPS, "scored": 4, "live": {**STOPPED_FLIPS["live"], "scored": 4}})
    text = render_report_markdown(UpdateReport(_update(5, "p", "REJECTED"), [_run("d", "0.8", 0, 4, compared=c)], {}))
    assert "items both scored" not in text


def test_nothing_compared_has_no_test_statistic():
    nothing = {"fixed": 0, "broken": 0, "both_right": 0, "both_wrong": 0, "paired": 0}
    c = comparison({"matches": 0, "scored": 0, "flips": nothing, "live": {"matches": 5, "scored": 8}})
    assert c["p_value"] is None and c["significant"] is False and c["live_accuracy"] is None
    report = UpdateReport(_update(5, "p", "FAILED"), [replace(_run("d", "0.8", 0, 1), comparison=c)], {})
    text, plain = render_report_markdown(report), render_text(report)
    assert "McNemar p 1" not in text and "n/a — no item scored by both" in text
    assert "McNemar" not in plain and "no item scored by both" in plain


def _field_failed():
    field = {"bar": "min_field_accuracy", "label": "amount", "limit": "85%", "value": "50.0%", "state": "fail"}
    run = _run("invoices", "0.8", 8, 10, bars=[{**field, "note": None}])
    return UpdateReport(_update(6, "invoice-reader", "REJECTED"), [replace(run, passed=False)], {})


def test_the_summary_row_is_the_accuracy_bars_and_the_headline_names_the_failing_bar():
    report = _field_failed()
    text = render_report_markdown(report)
    assert "### ❌ invoice-reader: REJECTED — invoices: amount read right on 50.0 % of items, needs 85 %" in text
    assert "| invoices | 80.0% (8/10) | 80% | ✅ pass |" in text  # accuracy cleared its bar
    view = update_view(report)
    assert view["runs"][0]["accuracy_result"] == "pass" and view["runs"][0]["result"] == "fail"
    assert view["missed"] == "invoices: amount read right on 50.0 % of items, needs 85 %"


def test_one_plain_name_per_bar():
    assert plain_bar("min_field_accuracy", "amount") == "amount read right"
    assert plain_bar("min_recall", "urgent") == "recall of urgent"
    assert plain_miss("min_accuracy", None, "48.6%", "90%") == "accuracy 48.6 %, needs 90 %"
    text = render_report_markdown(_field_failed())
    assert "min\\_field\\_accuracy" not in text and "| invoices | amount read right | 85% | 50.0% | ❌ fail |" in text
    from gate.verdict.bars import Bars

    assert "amount read right ≥ 85%" in Bars.parse("0.8", {"min_field_accuracy": {"amount": "0.85"}}).describe()


def test_one_count_of_calls_saved():
    spend = {"calls_made": 10, "calls_reused": 0, "calls_saved": 98}
    assert spend_line(spend, by=[("regression", 98)]) == "10 made, 0 reused, 98 saved by a stop in regression"
    two = spend_line({**spend, "calls_saved": 100}, by=[("hard", 2), ("regression", 98)])
    assert two == "10 made, 0 reused, 100 saved by a stop in hard (2) and regression (98)"
    assert spend_line(spend, by=[("hard", 5)]) == "10 made, 0 reused, 98 saved by a stop"  # not adding up: unnamed


def test_a_stored_sentence_says_its_calls_saved_no_more():
    from gate.report.update import SAID_SAVED

    said = "stopped after 4 of 20 items: even if every remaining item matched, accuracy would be at most 80 % < 90 %"
    assert SAID_SAVED.sub("", said + " — 0 calls saved") == said


def test_each_chart_row_carries_its_own_bar():
    def run(name, bar):
        return SimpleNamespace(dataset=name, accuracy=0.5, bar=Decimal(bar), comparison=None)

    differ = mermaid_chart([run("a", "0.8"), run("b", "0.9")])
    assert '"a · candidate · bar 80%", "b · candidate · bar 90%"' in differ and "line [" not in differ  # no zig-zag
    assert '"a · candidate · bar 80%"' in mermaid_chart([run("a", "0.8")])  # one row: its bar still shows
    same = mermaid_chart([run("a", "0.8"), run("b", "0.8")])
    assert "line [80.0, 80.0]" in same  # one bar for every row: a straight line
