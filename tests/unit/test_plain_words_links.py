"""Issue 49.6 and 49.7: the small texts a reader trips on, and the way from the comment to the
update's page (PROMPTGATE_PUBLIC_URL)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from support.action_harness import ROOT
from test_report_markdown import golden_reports

from gate.cli.demo import demo
from gate.cli.workers import worker
from gate.errors import UsageError
from gate.report.markdown import render_markdown
from gate.report.text_sections import accepted_lines
from gate.settings import Settings, public_url

TEMPLATES = [
    *(ROOT / "gate" / "report" / "templates").rglob("*.j2"),
    *(p for p in (ROOT / "gate" / "service" / "templates").rglob("*") if p.is_file()),
]


def test_no_character_a_font_may_lack_in_the_headers():
    """U+FF3C (a full-width backslash) showed as an empty box without CJK fonts."""
    for path in TEMPLATES:
        text = path.read_text(encoding="utf-8")
        assert "\uff3c" not in text and "\u2572" not in text, path.name


def test_demo_help_says_what_the_demo_does():
    said = CliRunner().invoke(demo, ["--help"]).output
    assert "five candidate changes, four REJECTED and one" in " ".join(said.split()), said
    assert "three candidate changes" not in said


def test_worker_role_help_lists_the_rollout_role():
    said = " ".join(CliRunner().invoke(worker, ["--help"]).output.split())
    assert "materialize, execute, finalize, reconcile, rollout" in said, said


def test_an_accepted_break_without_a_commit_is_not_not_recorded():
    class Run:
        accepted_breaks = [{"item": "i1", "state": "broke", "reason": "relabelled", "commit": None}]

    (line,) = accepted_lines(Run())
    assert "no commit given" in line and "not recorded" not in line


def test_the_comment_links_each_update_to_its_page_when_the_public_url_is_known(monkeypatch):
    reports = golden_reports()
    without = render_markdown(reports)
    assert "/updates/41" not in without
    monkeypatch.setenv("PROMPTGATE_PUBLIC_URL", "https://gate.example.com/pg/")
    linked = render_markdown(reports, context={"public_url": public_url()})
    assert "check · update [41](https://gate.example.com/pg/updates/41) · model" in linked


@pytest.mark.parametrize("bad", ["javascript:alert(1)", "https://u:p@gate.example", "https://gate.example/?t=1"])
def test_a_public_url_that_is_no_plain_url_is_one_line_error(bad):
    with pytest.raises(UsageError, match="PROMPTGATE_PUBLIC_URL"):
        Settings(public_url=bad)
