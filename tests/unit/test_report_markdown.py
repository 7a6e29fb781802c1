"""The Markdown report (PR comment, commit comment, step summary, `status --format
markdown`): golden files, escaping of untrusted text, and GitHub's 65,536-character limit."""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import replace
from decimal import Decimal

import pytest
from support.action_harness import GOLDEN, HEAD1, HEAD2, HOSTILE, REPO, ROOT, unescaped_pipes

from gate import gateconfig
from gate.action import Problem
from gate.records import FlipSample, ItemSample, Update
from gate.report.markdown import (
    GITHUB_COMMENT_LIMIT,
    MARKER,
    UnescapedOutput,
    environment,
    md,
    render_markdown,
    render_report_markdown,
)
from gate.report.update import RunReport, UpdateReport, comparison
from gate.verdict.bar_checks import drop_check
from gate.verdict.stats import label_metrics

T0 = dt.datetime(2024, 5, 1, 12, 0, 0)


def _run(
    ds,
    bar,
    matches,
    scored,
    failures=(),
    *,
    status="DONE",
    reason=None,
    confusion=None,
    errors=0,
    run_id=1,
    invalid=0,
    compared=None,
    baseline_note=None,
    bars=(),
    broken=(),
    calls=None,
    cost=None,
    fields_read=None,
):
    passed = None if status != "DONE" else matches / scored >= float(bar)
    metrics = (
        None
        if status not in ("DONE", "ERROR")
        else {
            "total": scored + errors,
            "scored": scored,
            "matches": matches,
            "mismatches": scored - matches,
            "errors": errors,
            "invalid": invalid,
            "confusion": confusion or {},
        }
    )
    return RunReport(
        run_id=run_id,
        dataset=ds,
        bar=Decimal(bar),
        status=status,
        total=scored + errors,
        scored=scored,
        matches=matches,
        errors=errors,
        pending=0,
        accuracy=(matches / scored) if scored else None,
        passed=passed,
        reason=reason,
        row_count=scored + errors,
        content_hash="3f" * 32,
        source_version="sha256:" + "9e" * 32,
        source_uri="/ws/datasets/x.csv",
        metrics=metrics,
        failures=list(failures),
        comparison=compared,
        baseline_note=baseline_note,
        checks=[
            {
                "bar": "min_accuracy",
                "label": None,
                "limit": f"{100 * float(bar):g}%",
                "value": f"{100 * matches / scored:.1f}%" if scored else None,
                "state": "fail" if passed is False and matches / scored < float(bar) else "pass",
                "note": None,
            },
            *bars,
        ],
        labels=label_metrics(confusion or {}),
        calls=calls,
        broken=list(broken),
        cost=cost,
        fields_read=fields_read,
    )


CALLS = {
    "latency_ms": {"p50": 412, "p95": 1210, "max": 2034, "timed": 16},
    "prompt_tokens": 5120,
    "completion_tokens": 48,
    "reused": 0,
}


def _update(uid, prompt, status, mode="check", reason=None, path=None):
    return Update(
        uid,
        prompt,
        mode,
        status,
        {"name": prompt, "model": "gpt-4o-mini"},
        "h" * 64,
        3,
        {"repo": REPO, "pr": 12, "sha": HEAD1, "path": path or f"prompts/{prompt}.yaml", "author": "octocat"},
        reason,
        T0,
        T0,
        T0,
    )


# urgency-regression against live: 2 fixed, none broken, on 98 items; a max_drop of 2 points
REGRESSION = {
    "matches": 89,
    "scored": 98,
    "flips": {"fixed": 2, "broken": 0, "both_right": 87, "both_wrong": 9, "paired": 98},
    "live": {"matches": 87, "scored": 98, "update_id": 37, "run_id": 10, "live_version": 3},
}


def golden_reports(hostile: str = "") -> list[UpdateReport]:
    rejected = UpdateReport(
        _update(41, "ticket-urgency", "REJECTED", reason="missed: urgency-hard 43.8% < bar 80%"),
        [
            _run(
                "urgency-hard",
                "0.8",
                7,
                16,
                run_id=1,
                confusion={"urgent": {"urgent": 1, "routine": 8}, "routine": {"routine": 6, "urgent": 1}},
                failures=[
                    ItemSample("urg-hard-01" + hostile, "urgent", "routine", "MISMATCH", "routine" + hostile, None),
                    ItemSample("urg-hard-02", "urgent", "(invalid)", "MISMATCH", "Perhaps? It depends.", None),
                    ItemSample("urg-hard-03", "urgent", None, "ERROR", None, "model call failed: 500 after 3 attempts"),
                ],
                compared=comparison(
                    {
                        "matches": 7,
                        "scored": 16,
                        "flips": {"fixed": 1, "broken": 4, "both_right": 6, "both_wrong": 5, "paired": 16},
                        "live": {"matches": 10, "scored": 16, "update_id": 37, "run_id": 9, "live_version": 3},
                    }
                ),
                bars=[
                    {"bar": "max_broken", "label": None, "limit": "0", "value": "4", "state": "fail", "note": None},
                    {
                        "bar": "min_recall",
                        "label": "urgent" + hostile,
                        "limit": "90%",
                        "value": "10.0%",
                        "state": "fail",
                        "note": None,
                    },
                ],
                broken=[
                    FlipSample("urg-hard-01" + hostile, "urgent", "urgent", "routine", "routine" + hostile),
                    FlipSample("urg-hard-05", "urgent", "urgent", "(invalid)", "Perhaps? It depends."),
                ],
                calls=CALLS,
                cost={
                    "usd": "0.0007968",
                    "per_1k_items": "0.0498",
                    "price": {"model": "gpt-4o-mini", "input_per_million": "0.15", "output_per_million": "0.60"},
                },
                fields_read=[
                    {"field": "subject" + hostile, "rows": 16, "of": 16, "optional": False},
                    {"field": "text", "rows": 9, "of": 16, "optional": False},
                ],
            ),
            _run(
                "urgency-regression",
                "0.9",
                89,
                98,
                run_id=2,
                confusion={"urgent": {"urgent": 32, "routine": 6}, "routine": {"routine": 57, "urgent": 3}},
                compared=comparison(REGRESSION),
                bars=[drop_check(Decimal("2"), Decimal("0.95"), REGRESSION).to_dict()],
            ),
        ],
        {"retried_items": 2, "extra_attempts": 3, "max_attempt": 3},
        {
            "calls_bound": 114,
            "max_calls_per_update": 2000,
            "max_cost_per_update_usd": None,
            "calls_made": 112,
            "calls_reused": 2,
            "calls_saved": 0,
            "cost_reserved_usd": None,
            "full": False,
        },
    )
    passed = UpdateReport(
        _update(
            42,
            "refund-eligibility",
            "PASSED",
            reason="every bar cleared (refund-hard 92.3% ≥ 80%; refund-regression 100.0% ≥ 90%)",
        ),
        [
            _run(
                "refund-hard",
                "0.8",
                12,
                13,
                run_id=3,
                confusion={"eligible": {"eligible": 6}, "not_eligible": {"not_eligible": 6, "eligible": 1}},
                failures=[ItemSample("ref-hard-07", "not_eligible", "eligible", "MISMATCH", "eligible", None)],
                baseline_note="no live version yet",
                bars=[
                    {
                        "bar": "max_broken",
                        "label": None,
                        "limit": "0",
                        "value": None,
                        "state": "n/a",
                        "note": "no live version yet",
                    }
                ],
                calls=CALLS,
                fields_read=[
                    {"field": "account_tier", "rows": 0, "of": 13, "optional": True},
                    {"field": "text", "rows": 13, "of": 13, "optional": False},
                ],
            ),
            _run(
                "refund-regression",
                "0.9",
                70,
                70,
                run_id=4,
                confusion={"eligible": {"eligible": 40}, "not_eligible": {"not_eligible": 30}},
            ),
        ],
        {"retried_items": 0, "extra_attempts": 0, "max_attempt": 1},
    )
    return [rejected, passed]


def golden_pr_markdown(hostile: str = "", **kw) -> str:
    problems = [Problem("prompts/broken.yaml", 7, "params.temprature", "unknown parameter; known are temperature, ...")]
    config = gateconfig.SyncResult(
        "gate.yaml",
        (
            gateconfig.Change(
                "bar-changed", "ticket-urgency × urgency-hard", "0.8", "0.6", ("ticket-urgency", "urgency-hard")
            ),
            gateconfig.Change("dataset-added", "urgency-extra", None, "datasets/urgency-extra.csv", ("urgency-extra",)),
        ),
        applied=False,
    )
    context = {
        "event": "pull_request",
        "repo": REPO,
        "pr": 12,
        "sha": HEAD1,
        "mode": "check",
        "run_url": "https://github.example/acme/prompts/actions/runs/42",
        "skipped": [("prompts/new-prompt.yaml", "prompt new-prompt is not gated: no dataset is mapped to it")],
    }
    return render_markdown(
        golden_reports(hostile), validation_errors=problems, config_changes=config, context=context, **kw
    )


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PROMPTGATE_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}: run with PROMPTGATE_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs (PROMPTGATE_UPDATE_GOLDEN=1 rewrites it)"


def test_golden_pr_comment():
    text = golden_pr_markdown()
    assert text.startswith(MARKER) and "takes effect after merge" in text and "```mermaid" in text
    check_golden("pr_comment.md", text)


def test_golden_push_comment():
    reports = golden_reports()[1:]
    applied = UpdateReport(
        _update(43, "refund-eligibility", "APPLIED", mode="apply", reason=reports[0].update.reason),
        reports[0].runs,
        reports[0].attempts,
    )
    config = gateconfig.SyncResult(
        "gate.yaml",
        (
            gateconfig.Change(
                "bar-added", "refund-eligibility × refund-hard", None, "0.8", ("refund-eligibility", "refund-hard")
            ),
        ),
        applied=True,
    )
    text = render_markdown(
        [applied], config_changes=config, context={"event": "push", "ref": "main", "sha": HEAD2, "mode": "apply"}
    )
    check_golden("push_comment.md", text)


def test_golden_stopped_early():
    """An update whose hard dataset settled its verdict early: the sentence, the run stopped
    with it, the calls made and saved, and a max_drop bar that is inconclusive."""
    sentence = (
        "stopped after 140 of 1,000 items: even if every remaining item matched, accuracy would be at most "
        "84.2 % < 90 %"
    )
    hard = replace(
        _run(
            "urgency-hard",
            "0.9",
            68,
            140,
            run_id=5,
            confusion={"urgent": {"urgent": 30, "routine": 40}, "routine": {"routine": 38, "urgent": 32}},
            bars=[
                {
                    **drop_check(
                        Decimal("2"),
                        Decimal("0.95"),
                        {"flips": {"fixed": 6, "broken": 8, "both_right": 62, "both_wrong": 64, "paired": 140}},
                    ).to_dict()
                }
            ],
        ),
        total=1000,
        stopped=860,
        passed=False,
        stop={"kind": "early_stop", "sentence": sentence, "calls_saved": 852},
    )
    regression = replace(
        _run("urgency-regression", "0.9", 120, 120, run_id=6),
        total=400,
        stopped=280,
        passed=None,
        checks=[],
        stop={"kind": "with_update", "sentence": None, "calls_saved": 280},
    )
    report = UpdateReport(
        _update(44, "ticket-urgency", "REJECTED", reason=f"stopped early: urgency-hard: {sentence}"),
        [hard, regression],
        {"retried_items": 0, "extra_attempts": 0, "max_attempt": 1},
        {
            "calls_bound": 1400,
            "max_calls_per_update": None,
            "max_cost_per_update_usd": "5",
            "calls_made": 268,
            "calls_reused": 0,
            "calls_saved": 1132,
            "cost_reserved_usd": "0.0421",
            "full": False,
        },
    )
    text = render_report_markdown(report)
    assert (
        "⏹️ urgency-hard: stopped after 140 of 1,000 items" in text
        and "❌ fail: inconclusive: the difference could be" in text
    )
    # the calls saved said once, where they add up (issue 49.4): never "0 calls saved" beside "98 saved"
    assert (
        "calls saved" not in text and "1,132 saved by a stop in urgency-hard (852) and urgency-regression (280)" in text
    )
    check_golden("stopped_comment.md", text)


def test_golden_single_report_for_the_demo():
    text = render_report_markdown(golden_reports()[0])
    assert not text.startswith(MARKER)
    check_golden("demo_report.md", text)


@pytest.mark.parametrize(
    "raw",
    [
        HOSTILE,
        "@org/team",
        "<img src=x onerror=alert(1)>",
        "a|b",
        "``` code",
        "https://evil.example/x",
        "line1\r\nline2\u2028line3",
        "\u202eevil",
        "- [ ] task",
        "#123 and GH-7",
        "$x^2$",
        "&lt;not an entity&gt;",
    ],
)
def test_md_makes_text_inert(raw):
    out = md(raw)
    assert "\n" not in out and "\r" not in out and "\u2028" not in out and "\u202e" not in out
    assert "<" not in out and ">" not in out
    assert not re.search(r"@[A-Za-z0-9]", out)  # no @-mention
    assert not re.search(r"(?<!\\)[`|\[\]*$]", out)  # table, code, link, emphasis, math
    assert not re.search(r"https?://|www\.", out)  # no autolink
    assert not re.search(r"#\d|GH-\d", out)  # no issue reference
    assert not out.startswith("-")
    assert md(out) is out  # escaping is done once


def test_every_template_value_goes_through_a_filter():
    env = environment()
    with pytest.raises(UnescapedOutput):
        env.from_string("{{ x }}").render(x="<img src=x>")
    with pytest.raises(UnescapedOutput):
        env.from_string("{{ x ~ 'y' }}").render(x="a")
    assert env.from_string("{{ x|md }} {{ n }}").render(x="<b>", n=3) == "&lt;b&gt; 3"
    # every {{ }} in the shipped templates ends in a filter (the finalize hook backs this up)
    for template in (ROOT / "gate" / "templates").glob("*.j2"):
        for expr in re.findall(r"{{(.*?)}}", template.read_text(), re.S):
            assert "|" in expr or expr.strip() in {"marker", "headline", "icon", "v.icon", "n"}, (template.name, expr)


def test_hostile_rows_and_outputs_cannot_break_the_report():
    text = golden_pr_markdown(HOSTILE + "`" * 5 + "x" * 70000)
    assert len(text) <= GITHUB_COMMENT_LIMIT
    assert "<img" not in text and "@org/team" not in text and "https://evil" not in text
    assert "[link](" not in text
    rows = [line for line in text.splitlines() if line.startswith("| urg-hard-01")]
    # the broken item (5 cells), listed once (issue 35.8: also as a failing one), its hostile | escaped
    assert sorted(unescaped_pipes(row) for row in rows) == [6]
    assert "x" * 200 not in text  # output excerpt cut
    # every table row keeps its column count
    for block in re.split(r"\n\n", text):
        lines = [ln for ln in block.splitlines() if ln.startswith("|")]
        if lines:
            assert len({unescaped_pipes(ln) for ln in lines}) == 1, block


def test_report_stays_under_the_comment_limit_with_a_note():
    failures = [ItemSample(f"item-{i}", "yes", "no", "MISMATCH", "<b>" * 300 + "y" * 70000, None) for i in range(5)]
    many = [
        UpdateReport(
            _update(100 + i, f"prompt-{i}", "REJECTED", reason="missed"),
            [
                _run(f"ds-{i}-{j}", "0.9", 1, 2, failures, run_id=j, confusion={"yes": {"yes": 1}, "no": {"yes": 1}})
                for j in range(3)
            ],
            {},
        )
        for i in range(12)
    ]
    text = render_markdown(many, excerpt_chars=2000)
    assert len(text) <= GITHUB_COMMENT_LIMIT and text.startswith(MARKER)
    assert "left out to stay under GitHub's 65536-character limit" in text
    problems = [Problem(f"prompts/p{i}.yaml", i, "name", "bad " * 50) for i in range(3000)]
    huge = render_markdown([], validation_errors=problems)
    assert len(huge) <= GITHUB_COMMENT_LIMIT and "This report was cut" in huge


# --- the Action against a gate database ------------------------------------------------------------------


def test_an_optional_fields_change_on_a_pull_request_takes_effect_after_merge():
    """The gate config's optional_fields are the default branch's word: a pull request's
    change of them is shown, not applied (issue 23, item 6)."""
    change = gateconfig.Change("optional-fields", "ticket-urgency", "none", "account_tier", ("ticket-urgency",))
    text = render_markdown(
        [],
        config_changes=gateconfig.SyncResult("gate.yaml", (change,), applied=False),
        context={"event": "pull_request", "pr": 12, "sha": HEAD1},
    )
    assert "**takes effect after merge**" in text
    assert "- prompt ticket-urgency: optional fields none → account\\_tier\n" in text
