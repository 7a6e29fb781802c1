"""One name per bar everywhere (issue 49.6): a stored reason keeps the bars' keys ("d
min_field_accuracy[amount] 85.0% < bar 90%": what the JSON API returns, what a holdout's
figures are redacted from), and every surface a reader reads — the comment, the status
page, `promptgate status` — names each bar as its tables do ("amount read right"), the key
only in the page's hover title."""

from __future__ import annotations

import html as htmllib
import re
from dataclasses import replace

from test_report_check_rates import CHECKS, page_html, report

from gate.report.markdown import render_report_markdown
from gate.report.text import render_text
from gate.service.dataset_access import without_field_figures

STORED = "missed: conversations 88.9% < bar 95%; conversations min_check_rate[never_promises_refund] 88.9% < bar 100%"
PLAIN = "conversations items passing the check never_promises_refund 88.9% < bar 100%"


def visible(html: str) -> str:
    """The page's text as a reader sees it: no tag, no attribute."""
    return htmllib.unescape(re.sub(r"<[^>]*>", " ", html))


def test_every_surface_names_a_bar_as_its_tables_do():
    base = report({"type": "checks", "checks": CHECKS})
    stored = replace(base, update=replace(base.update, reason=STORED))
    markdown, text, html = render_report_markdown(stored), render_text(stored), page_html(stored)
    assert PLAIN.replace("_", "\\_").replace("<", "&lt;") in markdown and "min\\_check\\_rate" not in markdown, markdown
    assert PLAIN in text and "min_check_rate" not in text, text  # the reason and the bar lines
    assert "bar items passing the check never_promises_refund" in text, text
    assert PLAIN in visible(html) and "min_check_rate" not in visible(html)
    assert f'title="{STORED.replace("<", "&lt;")}"' in html  # the key, on hover


def test_a_plain_reason_keeps_its_figures_datasets_and_a_holdouts_redaction():
    from gate.verdict.reasons import plain_reason

    stored = (
        "missed: max_broken_set 80.0% < bar 90%; h min_field_accuracy[amount] 60.0% < bar 80%; h max_broken 2 > bar 0"
    )
    assert plain_reason(stored) == (
        "missed: max_broken_set 80.0% < bar 90%; h amount read right 60.0% < bar 80%; "
        "h items broken against live 2 > bar 0"
    )
    redacted = without_field_figures(stored, ["h"])  # what a reader who may not read h is given
    assert "60.0%" not in plain_reason(redacted) and "h amount read right (figure left out) < bar 80%" in plain_reason(
        redacted
    )
    assert plain_reason("d min_slice_accuracy[channel]: a slice at 80.0% < bar 85%") == (
        "d accuracy of each slice by channel: a slice at 80.0% < bar 85%"
    )
    assert plain_reason(None) is None
