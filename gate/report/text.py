"""Reports of an update: plain text for the terminal (markdown reports live in templates).

Item ids, labels, answers and reasons come from datasets, models and pull requests: each
goes through ``terminal_safe`` (one line, no control characters), so a report cannot
retitle or clear the terminal that shows it, nor forge a line of its own.
"""

from __future__ import annotations

from decimal import Decimal

from gate.untrusted import terminal_safe as safe
from gate.verdict.bar_checks import points
from gate.verdict.reasons import detail_text, plain_reason
from gate.verdict.scoring import format_bar
from gate.verdict.stats import format_p

from . import unjudged
from .figures import bar_name, partly_paired
from .judge_view import judge_lines, judge_said
from .text_sections import accepted_lines, answer, check_lines, field_lines, protected_lines, slice_lines
from .tool_calls import failure_line, tool_lines
from .update import UpdateReport


def render_text(report: UpdateReport) -> str:
    u = report.update
    on_proposed = (u.source or {}).get("proposed_bars")
    proposed = " on the bars its pull request proposes, not yet the gate's" if on_proposed else ""
    status = u.status if report.outcome == u.status else f"{u.status} → {report.outcome}"
    reason = f" — {safe(plain_reason(u.reason))}" if u.reason else ""  # each bar by its plain name
    lines = [f"update {u.id}: {u.prompt_name} ({u.mode}) {status}{proposed}{reason}"]
    if report.outcome_sentence:  # what production made of it (gate.report.canary), or that nothing judged it
        said = "in production:" if report.rollout else unjudged.ICON
        lines.append(f"  {said} {safe(report.outcome_sentence)}")
    lines += protected_lines(report)
    for r in report.runs:
        lines += _run_lines(r)
    lines += _attempts_lines(report.attempts)
    if report.spend:
        lines.append(f"  calls: {spend_line(report.spend, report.terminal, by=saved_by(report.runs))}")
    return "\n".join(lines)


def _run_lines(r) -> list[str]:
    """One run: its accuracy against the bar and its verdict, then every detail it has."""
    unsaid = unjudged.STATE if r.not_judged else "stopped" if r.stop else r.status.lower()
    verdict = {True: "pass", False: "FAIL", None: unsaid}[r.passed]
    progress = f"{r.scored}/{r.total} scored" if r.total else "no items yet"  # as JSON's scored
    lines = [
        f"  {safe(r.dataset)}: {r.figure['shown']} vs bar {format_bar(r.bar)} [{verdict}] "
        f"{progress}, {r.errors} errors"
        + (f", {r.stopped} not scored" if r.stopped else "")
        + ("".join(f" ({safe(c['note'])})" for c in r.checks if c["bar"] == "min_accuracy" and c["note"]))
        + (f" — {safe(plain_reason(r.reason))}" if r.reason and r.status == "ERROR" else "")
        + (f" — {safe(detail)}" if r.status == "ERROR" and (detail := detail_text(r.metrics)) else "")
    ]
    lines += _stop_lines(r)
    lines += _trials_lines(r)
    lines += _fields_lines(r)
    lines += _comparison_lines(r)
    lines += judge_lines(r)
    lines += check_lines(r) + field_lines(r) + slice_lines(r)
    lines += _calls_lines(r)
    lines += [
        f"    bar {safe(bar_name(c))} "
        f"{c['limit']}: {c['value'] or 'n/a'} [{c['state']}]" + (f" — {safe(c['note'])}" if c["note"] else "")
        for c in r.checks
        if c["bar"] != "min_accuracy"
    ]
    lines += accepted_lines(r) + tool_lines(r)
    if r.reused:
        lines.append(
            f"    {r.reused_total} of {r.total} answers reused from update "
            + ", ".join(str(uid) for uid in sorted(r.reused))
        )
    return lines + _broken_lines(r) + _failure_lines(r)


def _broken_lines(r) -> list[str]:
    """The sampled items live answered right and the candidate wrong."""
    lines = []
    for b in r.broken:
        if b.wrong_fields is not None:
            lines.append(
                f"    broken {safe(b.item_id)}: expected {answer(b.expected_decision, b.wrong_fields)}, "
                f"candidate said {answer(b.candidate_decision, b.wrong_fields, True)}"
            )
            continue
        failed = f" — failed check {', '.join(safe(n, 64) for n in b.checks_failed)}" if b.checks_failed else ""
        lines.append(
            f"    broken {safe(b.item_id)}: {expected_part(b.expected_decision)}live said "
            f"{safe(b.live_decision or '')}, candidate said {safe(b.candidate_decision or '')}{failed}"
        )
    return lines


def _failure_lines(r) -> list[str]:
    """The sampled failing items: what was expected, what came back."""
    lines, broken = [], {b.item_id for b in r.broken}  # a broken item is failing too: listed once
    for f in r.failures:
        if f.item_id in broken:
            continue
        if f.call is not None or f.turns:  # a tool call side by side, a conversation's last turns
            lines += failure_line(f)
            continue
        out = safe(f.raw_output or f.error or "", 80)
        got = (
            answer(f.actual_decision, f.wrong_fields, True)
            if f.wrong_fields is not None
            else safe(f.actual_decision or f.verdict)
        )
        said = judge_said(f.judge)
        if f.wrong_fields is None and (f.raw_output or "").strip() == (f.actual_decision or "").strip():
            got, out = out, ""  # the answer is the decision (free text, checks): said once
        lines.append(
            f"    {safe(f.item_id)}: {expected_part(f.expected_decision, f.wrong_fields)}got {got}"
            + (f": {out}" if out else "")
            + (f" — {'' if (f.judge or {}).get('checks_failed') else 'judge: '}{safe(said, 120)}" if said else "")
        )
    return lines


def expected_part(expected: str | None, wrong: list[dict] | None = None) -> str:
    """ "expected X, " of an item's line; nothing for a row without a label (a judged prompt's
    dataset needs none: its judge reads the answer)."""
    return f"expected {answer(expected, wrong)}, " if expected or wrong is not None else ""


def _attempts_lines(attempts: dict) -> list[str]:
    """Calls beyond the first per item, and calls held back by rate limits, when any."""
    extra = [
        f"{attempts[k]} {label}"
        for k, label in (
            ("retried_items", "items retried"),
            ("throttled_calls", "calls throttled"),
            ("rate_limited_calls", "calls rate-limited (429)"),
        )
        if attempts.get(k)
    ]
    return ["  " + ", ".join(extra)] if extra else []


STOPPED_WITH = {
    "with_update": "stopped with its update: another dataset settled the verdict, so its remaining "
    "items were not called",
    "spend_cap": "stopped: the update reached its spend cap, so its remaining items were not called",
    "judge_drift": "stopped: its judge drifted on its sentinels, so its remaining items were not judged",
}


def _stop_lines(r) -> list[str]:
    """A run stopped before every item was called: why, in a sentence."""
    if not r.stop:
        return []
    if r.stop["kind"] == "early_stop":
        return [f"    {safe(r.stop['sentence'] or 'stopped early: its verdict was settled')}"]
    return [f"    {STOPPED_WITH.get(r.stop['kind'], 'stopped')}"]


def saved_by(runs) -> list[tuple[str, int]]:
    """The calls each stopped run saved, by dataset (its final figures: the one count)."""
    return [(r.dataset, int(r.stop.get("calls_saved") or 0)) for r in runs if r.stop and r.stop.get("calls_saved")]


def spend_line(
    spend: dict, terminal: bool = True, *, started: bool = True, by: list[tuple[str, int]] | None = None
) -> str:
    """What an update's calls came to: "140 made, 0 reused, 860 saved by a stop (1,000 model
    calls before retries; cap 300 calls per update)"; at submit (``started`` False) only the
    bound and the caps: "at most 1,000 model calls before retries (...)". The bound is items ×
    trials: a retried call comes on top (a call cap counts it). Calls that may have been made
    and were never recorded (workers killed holding their items) are said as such: "5,000
    made (recorded); up to 511 more may have been made by workers that died, 0 reused" (of an
    open update, ``terminal`` False: "... more in flight or lost with a worker")."""
    bound = spend.get("calls_bound")
    if not started:  # the caps alone, built as such (not cut out of the whole line: issue 50)
        rest = "; ".join(spend_limits(spend, with_bound=False))
        head = f"at most {bound:,} model calls before retries" if bound is not None else "staged"
        return head + (f" ({rest})" if rest else "")
    limits = spend_limits(spend)
    return ", ".join(spend_done(spend, terminal, by)) + (f" ({'; '.join(limits)})" if limits else "")


def spend_done(spend: dict, terminal: bool = True, by: list[tuple[str, int]] | None = None) -> list[str]:
    """The calls made, reused and saved (``spend_line``; ``by``: the calls each dataset's stop saved)."""
    unrecorded = spend.get("calls_unrecorded") or 0
    made = f"{spend.get('calls_made') or 0:,} made"
    if unrecorded:
        where = "may have been made by workers that died" if terminal else "in flight or lost with a worker"
        made += f" (recorded); up to {unrecorded:,} more {where}"
    done = [made, f"{spend.get('calls_reused') or 0:,} reused"]
    if spend.get("calls_saved"):
        done.append(f"{spend['calls_saved']:,} saved by a stop{_where_saved(spend['calls_saved'], by or [])}")
    return done


def spend_limits(spend: dict, with_bound: bool = True) -> list[str]:
    """The bound, the caps and what is reserved (``spend_line``'s parenthesis)."""
    set_caps = [
        f"{spend['max_calls_per_update']:,} calls" if spend.get("max_calls_per_update") else None,
        f"${spend['max_cost_per_update_usd']}" if spend.get("max_cost_per_update_usd") else None,
    ]
    caps = [c for c in set_caps if c]
    bound = spend.get("calls_bound") if with_bound else None
    limits = (
        ([f"{bound:,} model calls before retries"] if bound is not None else [])
        + ([f"cap {' and '.join(caps)} per update"] if caps else [])
        + (["every item called (--full)"] if spend.get("full") else [])
    )
    if spend.get("cost_reserved_usd") not in (None, "0"):
        limits.append(f"${spend['cost_reserved_usd']} reserved")
    return limits


def _where_saved(saved: int, by: list[tuple[str, int]]) -> str:
    """Which datasets' stops saved the calls, when they add up to the count said: " in d", or
    " in hard (852) and regression (280)"; nothing otherwise."""
    if not by or sum(n for _, n in by) != saved:
        return ""
    if len(by) == 1:
        return f" in {safe(by[0][0], 60)}"
    named = [f"{safe(d, 60)} ({n:,})" for d, n in by]
    return " in " + ", ".join(named[:-1]) + " and " + named[-1]


def _trials_lines(r) -> list[str]:
    """A run with trials: the rule, how many items are unstable, and those listed (their
    trials disagree; the first of them, dataset order)."""
    t = r.trials
    if not t:
        return []
    unstable = "" if t["unstable"] is None else f"; {t['unstable']} unstable item{'s' if t['unstable'] != 1 else ''}"
    lines = [f"    trials: {t['n']} calls per item, {t['rule']} ({t['needed']} of {t['n']} must match){unstable}"]
    for u in r.unstable:
        lines.append(
            f"    unstable {safe(u.item_id)}: {expected_part(u.expected_decision)}trials "
            f"{', '.join(safe(a, 40) for a in u.answers)} → {u.verdict}"
        )
    return lines


def _fields_lines(r) -> list[str]:
    """The item fields the templates read and how many rows of the dataset have each."""
    if not r.fields_read:
        return []
    return ["    fields read: " + "; ".join(f"{safe(f['field'], 80)}: {coverage(f)}" for f in r.fields_read)]


def coverage(f: dict) -> str:
    """ "0 of 120 rows (optional)"; "not counted" (the version has too many fields)."""
    rows = "not counted" if f["rows"] is None else f"{f['rows']} of {f['of']} rows"
    return rows + (" (optional)" if f["optional"] else "")


def _comparison_lines(r) -> list[str]:
    """Live against candidate on the same items, or why there is no such comparison."""
    c = r.comparison
    if c is None:
        return [f"    vs live: n/a — {safe(r.baseline_note)}"] if r.baseline_note and r.status == "DONE" else []
    verdict = "is" if c["significant"] else "is not"
    on = f" on the {c['paired']} items both scored" if partly_paired(c) else ""
    test = (
        "no item scored by both"
        if c["p_value"] is None
        else f"McNemar p = {format_p(c['p_value'])}: it {verdict} significant at 5%"
    )
    return [
        f"    vs live (update {c['live_update_id']}){on}: {_pct_ci(c['live_accuracy'], c['live_interval'])} → "
        f"{_pct_ci(c['accuracy'], c['interval'])}; fixed {c['fixed']}, broken {c['broken']}",
        f"    difference vs live: {difference(c)}; {test}",
    ]


def difference(c: dict) -> str:
    """The paired difference with its interval: "−1.2 pts [−3.4, +0.9] (95% interval)"."""
    interval = c.get("difference_interval")
    if not interval or c.get("difference_points") is None:
        return "n/a"
    return (
        f"{points(c['difference_points'] / 100)} pts [{points(interval[0])}, {points(interval[1])}] "
        f"({format_bar(Decimal(str(c.get('confidence', 0.95))))} interval)"
    )


def _pct_ci(value, interval) -> str:
    if value is None:
        return "n/a"
    return f"{100 * value:.1f}%" + (f" [{100 * interval[0]:.1f}–{100 * interval[1]:.1f}]" if interval else "")


def _calls_lines(r) -> list[str]:
    """Latency, tokens and (with a price) cost of a finished run's answers."""
    calls = r.calls if r.status == "DONE" else None
    if not calls or not calls["latency_ms"]["timed"]:
        return []
    lat = calls["latency_ms"]
    cost = f"; cost ${float(r.cost['usd']):.4f} (${float(r.cost['per_1k_items']):.4f} per 1k items)" if r.cost else ""
    count = f"{calls['calls']} ({r.trials['n']} per item), " if r.trials and "calls" in calls else ""
    return [
        f"    calls: {count}latency p50 {lat['p50']} ms, p95 {lat['p95']} ms, max {lat['max']} ms; tokens "
        f"{calls['prompt_tokens']} in, {calls['completion_tokens']} out{cost}"
    ]
