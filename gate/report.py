"""Reports of an update: plain text for the terminal (markdown reports live in templates)."""

from __future__ import annotations

from .scoring import format_bar, format_pct
from .service import UpdateReport


def render_text(report: UpdateReport) -> str:
    u = report.update
    lines = [f"update {u.id}: {u.prompt_name} ({u.mode}) {u.status}" + (f" — {u.reason}" if u.reason else "")]
    for r in report.runs:
        verdict = {True: "pass", False: "FAIL", None: r.status.lower()}[r.passed]
        progress = f"{r.scored + r.errors}/{r.total} scored" if r.total else "no items yet"
        lines.append(f"  {r.dataset}: {format_pct(r.matches, r.scored)} vs bar {format_bar(r.bar)} [{verdict}] "
                     f"{progress}, {r.errors} errors" + (f" — {r.reason}" if r.reason and r.status == "ERROR" else ""))
        for f in r.failures:
            out = (f.raw_output or f.error or "").replace("\n", " ")[:80]
            lines.append(f"    {f.item_id}: expected {f.expected_decision}, got {f.actual_decision or f.verdict}: {out}")
    a = report.attempts
    extra = [f"{a[k]} {label}" for k, label in (("retried_items", "items retried"),
                                                 ("throttled_calls", "calls throttled"),
                                                 ("rate_limited_calls", "calls rate-limited (429)")) if a.get(k)]
    if extra:
        lines.append("  " + ", ".join(extra))
    return "\n".join(lines)
