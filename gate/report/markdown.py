"""Markdown reports: one Jinja source (``gate/report/templates/*.md.j2``) for the pull-request
comment, the commit comment, the Actions step summary, ``promptgate demo`` and
``promptgate status --format markdown``.

Everything that comes from a dataset row, a model's output, a prompt file or a pull
request is untrusted. The environment has autoescape off (this is Markdown, not HTML) and
instead a ``finalize`` hook that refuses to print any plain string: every ``{{ ... }}``
must go through the ``md`` filter (escape untrusted text) or one of the formatting
filters (``gate.report.markdown_filters``, which also says what ``md`` makes inert), which return
:class:`Safe`. A template that prints a raw value fails loudly in the tests instead of
shipping an injection.

The comment stays under GitHub's 65,536-character limit: when it would not, failing-item
samples are cut first (with a note saying so), then output excerpts, then the details.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from gate.verdict.reasons import detail_text, plain_reason

from . import canary, item_rows, sections, unjudged
from .figures import accuracy_state, bar_name, headline_miss, partly_paired
from .judge_view import cost_line, judge_said, pairwise_line, rate_line, sentinel_line, sentinel_power_line
from .markdown_filters import (
    Safe,
    UnescapedOutput,
    bar_pct,
    chart_pct,
    code,
    decided,
    difference,
    interval,
    link,
    md,
    mermaid_label,
    num,
    pct,
    points,
    pvalue,
    ratio,
    run_counts,
    run_pct,
    short_hash,
    usd,
)
from .text import saved_by, spend_line
from .update import RunReport, UpdateReport

MARKER = "<!-- prompt-gate:report -->"
GITHUB_COMMENT_LIMIT = 65536
STEP_SUMMARY_LIMIT = 1024 * 1024 - 1024  # GitHub refuses a step summary over 1 MiB
TEMPLATES = Path(__file__).resolve().parent / "templates"
DEFAULT_SAMPLES = 5
DEFAULT_EXCERPT = 160


# --- the environment: every print through a filter ------------------------------------------------


def _finalize(value: Any) -> Any:
    if isinstance(value, Safe):
        return value
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    raise UnescapedOutput(
        f"template printed an unescaped {type(value).__name__} {str(value)[:40]!r}: "
        "pass it through |md (untrusted) or a formatting filter"
    )


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=False,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_finalize,
    )
    env.filters.update(
        md=md,
        code=code,
        short_hash=short_hash,
        mermaid_label=mermaid_label,
        mermaid_chart=mermaid_chart,
        num=num,
        pct=pct,
        run_pct=run_pct,
        run_counts=run_counts,
        chart_pct=chart_pct,
        bar_pct=bar_pct,
        link=link,
        points=points,
        interval=interval,
        pvalue=pvalue,
        ratio=ratio,
        usd=usd,
        decided=decided,
        difference=difference,
        partly_paired=partly_paired,
        bar_name=bar_name,
        plain_reason=plain_reason,
        judge_said=judge_said,
        rate_line=rate_line,
        pairwise_line=pairwise_line,
        sentinel_line=sentinel_line,
        sentinel_power_line=sentinel_power_line,
        cost_line=cost_line,
        built=_built,
    )
    return env


def _built(value: Any) -> Safe:
    """A macro's output (items_table.md.j2's cells): made only of filtered prints, each
    escaped when it was printed, so it is printed as it is."""
    return Safe(str(value))


_ENV: Environment | None = None


def _env() -> Environment:
    global _ENV
    if _ENV is None:
        _ENV = environment()
    return _ENV


# --- view model ------------------------------------------------------------------------------

ICONS = {
    "APPLIED": "✅",
    "PASSED": "✅",
    "REJECTED": "❌",
    "FAILED": "💥",
    "CANCELLED": "⏹️",
    "PENDING": "⏳",
    "RUNNING": "⏳",
}


def _icon(report: UpdateReport) -> str:
    """The status's icon; an APPLIED update's canary's once it has one (never ✅ for a canary
    rolled back, undecided or still in progress: gate.report.canary)."""
    if report.outcome == unjudged.OUTCOME:  # applied without a judge: never ✅
        return unjudged.ICON
    return canary.icon(report.status, report.rollout, ICONS.get(report.status, "•"))


def _run_view(run: RunReport, samples: int, excerpt: int) -> dict:
    metrics = run.metrics or {}
    shown_sections = sections.keyed(sections.run_sections(run))
    confusion = (metrics.get("confusion") or {}) if "labels" in shown_sections else {}
    actual_labels = sorted({a for row in confusion.values() for a in row})
    failing_total = sections.failing_total(run)
    broken = run.broken[: max(0, samples)]
    shown = sections.other_failures(run)[: max(0, samples)]  # a broken item is listed once, under broken
    other_total = sections.other_failing_total(run)
    if run.not_judged:  # accepted unjudged: neither a pass nor a fail (gate.report.unjudged)
        result = unjudged.STATE
    elif run.passed is True:
        result = "pass"
    elif run.passed is False:
        result = "fail"
    elif run.stop:
        result = "stopped"
    else:
        result = run.status.lower()
    return {
        "run": run,
        "result": result,
        "accuracy_result": accuracy_state(run, result),  # the summary row's: its accuracy bar's own
        # rows without a label (a judged prompt's dataset) have no row in the matrix
        "confusion": [(exp, [confusion[exp].get(a, 0) for a in actual_labels]) for exp in sorted(confusion) if exp],
        "actual_labels": actual_labels,
        "sections": shown_sections,
        "mode": item_rows.table_mode(run),  # how its items are drawn side by side (items_table.md.j2)
        "broken_rows": [item_rows.broken_row(b) for b in broken],
        "failing_rows": [item_rows.failing_row(f) for f in shown],
        "reasons": any(row["reason"] for row in item_rows.rows_of(broken, shown)),  # a judge gave one: its column
        **item_rows.expected_columns(shown, run.unstable),  # none for a dataset without labels
        "failing_total": failing_total,
        "other_total": other_total,
        "failures_cut": other_total > len(shown),
        "excerpt": excerpt,
        "invalid": metrics.get("invalid", 0),
        "detail": detail_text(metrics),
        "compared": run.comparison,
        "baseline_note": run.baseline_note if run.status == "DONE" else None,
        "bars": [c for c in run.checks if c["bar"] != "min_accuracy"],
        "labels": sorted(run.labels.items()),
        "calls": run.calls if run.status == "DONE" else None,
        "broken": broken,
        "trials": run.trials,
        "unstable": run.unstable[: max(0, samples)],
        "fields": run.fields,
        "slices": run.slices,
        "protected": run.protected,
        "accepted": run.accepted_breaks,
    }


def _update_view(
    report: UpdateReport, samples: int, excerpt: int, details: bool, charts: bool, public_url: str | None = None
) -> dict:
    u = report.update
    config = u.candidate_config or {}
    attempts = {k: v for k, v in (report.attempts or {}).items() if isinstance(v, int)}
    proposed = _on_proposed_bars(report)
    return {
        "u": u,
        "icon": Safe(PROPOSED_ICON if proposed and u.status == "PASSED" else _icon(report)),
        "outcome": canary.heading(u.status, report.rollout)  # an APPLIED one's canary
        or (unjudged.STATE if report.outcome == unjudged.OUTCOME else None),
        "in_production": report.outcome_sentence if report.rollout else None,
        "not_judged": unjudged.sentence(u),
        "proposed": proposed,
        "model": config.get("model"),
        "path": (u.source or {}).get("path"),
        "page_url": f"{str(public_url).rstrip('/')}/updates/{int(u.id)}" if public_url else None,  # its status page
        "runs": [_run_view(r, samples, excerpt) for r in report.runs],
        "sections": sections.keyed(sections.update_sections(report.runs)),  # the kinds' (gate.kinds.sections)
        "missed": headline_miss(report.runs) if report.terminal else None,  # the failing bar, in plain words
        "attempts": attempts,
        "terminal": report.terminal,
        "details": details,
        # inside the details, bars only: no line joins two datasets
        "chart": report.runs if charts and any(r.accuracy is not None for r in report.runs) else None,
        "spend": spend_line(report.spend, report.terminal, by=saved_by(report.runs)) if report.spend else None,
    }


CHART_TOP, CHART_ROW, CHART_WIDTH, CHART_NAME = 110, 30, 700, 24  # px, px, px, characters


def mermaid_chart(runs: Sequence[Any]) -> Safe:
    """The accuracy chart as a Mermaid block: ONE horizontal bar series with one bar per
    dataset × version — "hard · live", "hard · candidate" — each named on its axis with the
    bar its dataset must clear ("hard · candidate · bar 90%") and labelled with its value.
    Mermaid's ``xychart-beta`` draws several bar series on top of one another in one colour
    and without a legend (a bar of 85 % hid a candidate of 66.7 %), and a line series joins
    every row's bar into one zig-zag across datasets whose bars differ (and draws nothing for
    one row): so each row carries its own bar in its name, whatever the number of rows, and
    a red line (a colour of its own) marks the bar only when every row has the same, where
    it is straight. Horizontal, so the
    names read at GitHub's comment width however many datasets there are. A dataset the live
    version was not compared on has no live bar, one with nothing scored no candidate bar
    (rather than a zero)."""
    bars, limits = [], []
    for r in runs:
        name = re.sub(r"[^A-Za-z0-9._ -]", "", str(r.dataset or ""))[:CHART_NAME] or "?"
        own = f" · bar {bar_pct(r.bar)}" if r.bar is not None else ""
        rows = []
        if r.comparison and r.comparison.get("live_accuracy") is not None:
            rows.append((f"{name} · live{own}", r.comparison["live_accuracy"]))
        if r.accuracy is not None:  # nothing scored: no bar, rather than a zero
            rows.append((f"{name} · candidate{own}", r.accuracy))
        if not rows:  # still a row, so that its bar shows
            rows.append((f"{name} · nothing scored{own}", 0))
        bars += rows
        limits += [r.bar] * len(rows)
    # one bar for every row: also a line, straight; bars that differ would zig-zag, so none
    line = len(bars) > 1 and len(set(limits)) == 1 and limits[0] is not None
    what = "live and candidate" if any(r.comparison for r in runs) else "candidate"
    lines = [
        "```mermaid",
        "---",
        "config:",
        "  xyChart:",
        f"    width: {CHART_WIDTH}",
        f"    height: {CHART_TOP + CHART_ROW * len(bars)}",
        "    showDataLabel: true",
        "    plotReservedSpacePercent: 40",  # room for the labels, each naming its bar
        "  themeVariables:",
        "    xyChart:",
        f'      plotColorPalette: "{CHART_BAR_COLOUR}, {CHART_LINE_COLOUR}"',
        "---",
        "xychart-beta horizontal",
        f'    title "Accuracy (%): {what} per dataset, each named with the bar it must clear'
        + ('; the red line is that bar"' if line else '"'),
        "    x-axis [" + ", ".join(f'"{label}"' for label, _ in bars) + "]",
        '    y-axis "%" 0 --> 100',
        "    bar [" + ", ".join(chart_pct(value) for _, value in bars) + "]",
        *(["    line [" + ", ".join(chart_pct(value) for value in limits) + "]"] if line else []),
        "```",
    ]
    return Safe("\n".join(lines))


CHART_BAR_COLOUR, CHART_LINE_COLOUR = "#9DB9E0", "#D1242F"  # measured: pale blue; the bar to clear: red


def _headline(reports: Sequence[UpdateReport], problems: int) -> str:
    counts: dict[str, int] = {}
    for r in reports:
        counts[_counted(r)] = counts.get(_counted(r), 0) + 1
    order = ["APPLIED", unjudged.OUTCOME, "PROMOTED", "CANARY", "ROLLED_BACK", "UNDECIDED", "SUPERSEDED"]
    order += ["PASSED", "REJECTED", "FAILED", "CANCELLED", "RUNNING", "PENDING"]
    words = {"RUNNING": "still running", "PENDING": "still pending", **{str(k): v for k, v in canary.WORDS.items()}}
    words[unjudged.OUTCOME] = unjudged.WORDS
    parts = [f"{counts[s]} {words.get(s, s.lower())}" for s in order if counts.get(s)]
    proposed = sum(1 for r in reports if _on_proposed_bars(r))
    if proposed:
        parts.append(f"{proposed} on the bars this pull request proposes")
    if problems:
        parts.append(f"{problems} invalid file{'s' if problems != 1 else ''}")
    return " · ".join(parts) or "no prompt to evaluate"


PROPOSED_ICON = "☑️"  # passed the bars a pull request proposes: never ✅, the gate's own bars


def _on_proposed_bars(report: UpdateReport) -> bool:
    """Judged on the bars its pull request proposes (the gate had none for the prompt)."""
    return bool((report.update.source or {}).get("proposed_bars"))


def _counted(report: UpdateReport) -> str:
    """What the headline counts an update as: its status, an APPLIED one's canary's state."""
    return report.outcome


def overall_icon(reports: Sequence[UpdateReport], problems: int) -> str:
    statuses = {r.status for r in reports}
    outcomes = {r.outcome for r in reports}
    if problems or statuses & {"FAILED", "CANCELLED"}:
        return "💥" if statuses & {"FAILED"} or problems else "⏹️"
    if "REJECTED" in statuses:
        return "❌"
    if outcomes & canary.ENDED_BADLY:  # production showed it worse, or never showed it good
        return canary.ICONS[canary.RO.ROLLED_BACK]
    if statuses & {"PENDING", "RUNNING"}:
        return "⏳"
    if "CANARY" in outcomes:
        return canary.ICONS[canary.RO.CANARY]
    if unjudged.OUTCOME in outcomes:  # applied without a judge: never ✅
        return unjudged.ICON
    return PROPOSED_ICON if any(_on_proposed_bars(r) for r in reports) else "✅"


def _render(
    reports, problems, config, context, samples, excerpt, details, charts, marker, truncated, limit=GITHUB_COMMENT_LIMIT
) -> str:
    ctx = dict(context or {})
    data = {
        "marker": Safe(MARKER) if marker else None,
        "headline": Safe(_headline(reports, len(problems))),
        "icon": Safe(overall_icon(reports, len(problems))),
        "ref": ctx.get("ref"),
        "mode": ctx.get("mode") or "",
        "sha": ctx.get("sha"),
        "pr": ctx.get("pr") if isinstance(ctx.get("pr"), int) else None,
        "event": ctx.get("event"),
        "title": ctx.get("title"),
        "notes": list(ctx.get("notes") or ()),
        "skipped": list(ctx.get("skipped") or ()),
        "run_url": ctx.get("run_url"),
        "problems": problems,
        "config": config,
        "updates": [_update_view(r, samples, excerpt, details, charts, ctx.get("public_url")) for r in reports],
        "truncated": truncated,
        "limit": limit,
    }
    return _env().get_template("report.md.j2").render(**data)


def render_markdown(
    reports: Iterable[UpdateReport],
    *,
    validation_errors: Iterable[Any] = (),
    config_changes: Any = None,
    context: Mapping[str, Any] | None = None,
    samples: int = DEFAULT_SAMPLES,
    excerpt_chars: int = DEFAULT_EXCERPT,
    max_chars: int = GITHUB_COMMENT_LIMIT,
    marker: bool = True,
) -> str:
    """The whole report: one section per update, the invalid files, the gate config
    changes. ``validation_errors`` are objects with file, line, field, reason;
    ``config_changes`` is a :class:`gate.gateconfig.SyncResult` (``applied`` False: shown
    as "takes effect after merge"); ``context`` may hold event, repo, pr, sha, run_url,
    public_url (the gate's status page, PROMPTGATE_PUBLIC_URL: each update links to its
    page), title, notes (list of str) and skipped (list of (path, reason)). The result is
    at most ``max_chars`` characters."""
    reports = list(reports)
    problems = list(validation_errors or ())
    attempts = []
    for n in sorted({samples, min(samples, 3), min(samples, 1), 0}, reverse=True):
        attempts.append((n, excerpt_chars, True, True))
    attempts += [(0, excerpt_chars, False, True), (0, excerpt_chars, False, False)]
    text = ""
    for i, (n, excerpt, details, charts) in enumerate(attempts):
        truncated = i > 0
        text = _render(
            reports, problems, config_changes, context, n, excerpt, details, charts, marker, truncated, max_chars
        )
        if len(text) <= max_chars:
            return text
    return hard_cut(text, max_chars)


def hard_cut(text: str, max_chars: int) -> str:
    """Cut at a line boundary, close an open code fence, and say so."""
    note = (
        f"\n\n> ✂️ This report was cut to stay under GitHub's {max_chars}-character limit; "
        "the workflow run's step summary and `promptgate report ID` show all of it.\n"
    )
    budget = max(0, max_chars - len(note) - 8)
    cut = text[:budget]
    if "\n" in cut:
        cut = cut[: cut.rfind("\n")]
    if sum(1 for line in cut.splitlines() if line.startswith("```")) % 2:
        cut += "\n```"
    return cut + note


def render_report_markdown(
    report: UpdateReport,
    *,
    context: Mapping[str, Any] | None = None,
    samples: int = DEFAULT_SAMPLES,
    marker: bool = False,
) -> str:
    """One update as Markdown: for `promptgate demo` and `promptgate status --format markdown`."""
    return render_markdown([report], context=context, samples=samples, marker=marker)


__all__ = [
    "GITHUB_COMMENT_LIMIT",
    "MARKER",
    "Safe",
    "UnescapedOutput",
    "code",
    "environment",
    "md",
    "render_markdown",
    "render_report_markdown",
]
