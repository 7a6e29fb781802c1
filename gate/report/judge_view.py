"""What a report says of a judged run (gate/prompt/judge.py): the judge and its agreement
with the humans ("agrees with humans on 93% of 200 items, κ 0.85, sensitivity 0.95,
specificity 0.90"), the pass rate as judged with its interval, the pass rate corrected for
the judge's own error rates with its interval (``gate.verdict.judge_stats``), a
comparison's wins, losses, ties and position-inconsistent items, the sentinels and their
test, and the calls and cost by role. ``judge_view`` is the report's ``judge`` field
(``status --json``); ``judge_lines`` the text report's lines; the Markdown report reads the
view (templates/judge.md.j2).

Of the judge's human-labelled datasets a report shows aggregates only (never a row, a
sentinel or a count per label): they may be a holdout."""

from __future__ import annotations

import math

from gate.records.metrics import JudgeFigures, RunFigures, RunMetrics
from gate.records.pinned import Pinned
from gate.untrusted import terminal_safe as safe

ROLES = ("candidate", "judge", "sentinel", "live")


def judge_view(pinned: Pinned, metrics: RunMetrics | None) -> dict | None:
    """The report's ``judge`` field of a run (None: not judged)."""
    judge = pinned.judge
    if not judge:
        return None
    figures = RunFigures.of(metrics).judge or JudgeFigures()
    agreement = dict(judge.agreement or {})
    agreement.pop("confusion", None)
    rates = judge.error_rates
    if rates:
        se_k, se_n, sp_k, sp_n = rates
        agreement["sensitivity"] = se_k / se_n if se_n else None
        agreement["specificity"] = sp_k / sp_n if sp_n else None
    scored = figures.scored
    return {
        "name": judge.name,
        "version": judge.version,
        "config_hash": judge.config_hash,
        "mode": "pairwise" if judge.compare else "graded",
        "pass": None if judge.passing is None else list(judge.passing),
        "trials": judge.trials,
        "agreement": agreement,
        "agreement_line": agreement_line(agreement),
        "pass_rate": figures.passed / scored if scored else None,
        "interval": None if figures.interval is None else list(figures.interval),
        "corrected": {**figures.corrected, "barred": bool(judge.corrected)} if figures.corrected else None,
        "uncorrected": figures.uncorrected,
        "pairwise": None if figures.pairwise is None else figures.pairwise.to_json(),
        "sentinels": None if figures.sentinels is None else figures.sentinels.to_json(),
        "calls": figures.calls,
    }


def shown_pinned(pinned: Pinned) -> dict | None:
    """What a run pinned, as a report shows it: a judge's (and a comparison's live version's)
    provider declaration stays with the workers, as the update's own does (where calls go and
    which key variable they carry are the gate's, not a reader's)."""
    judge = pinned.judge
    if not judge:
        return pinned.to_json()
    shown = {k: v for k, v in judge.to_json().items() if k != "provider"}
    if judge.live:
        shown["live"] = {k: v for k, v in judge.live.to_json().items() if k != "provider"}
    return {**(pinned.to_json() or {}), "judge": shown}


def agreement_line(agreement: dict) -> str:
    """ "agrees with humans on 93% of 200 items, sensitivity 0.95, specificity 0.90, beyond chance
    0.85 (Cohen's κ)": the plain figures first, a statistic's name after its value (issue 49.6)."""
    if not agreement.get("n"):
        return "no agreement figures"
    parts = [f"agrees with humans on {_pct(agreement['accuracy'])} of {agreement['n']:,} items"]
    for name in ("sensitivity", "specificity"):
        if agreement.get(name) is not None:
            parts.append(f"{name} {agreement[name]:.2f}")
    if agreement.get("kappa") is not None:
        parts.append(f"beyond chance {agreement['kappa']:.2f} (Cohen's κ)")
    return ", ".join(parts)


def _pct(value: float | None) -> str:
    if value is None:
        return "n/a"
    shown = f"{100 * value:.1f}".removesuffix(".0")
    return f"{shown}%"


def _interval(pair) -> str:
    return f" [{100 * pair[0]:.1f}–{100 * pair[1]:.1f}]" if pair else ""


def compared_accuracy(run) -> str | None:
    """A comparison's accuracy as its min_accuracy bar reads it (issue 46): the share of the
    items compared consistently not lost, or n/a when the bar could not be judged (nothing
    was compared); None for another run (its matches over the items scored)."""
    check = next((c for c in run.checks if c["bar"] == "min_accuracy"), None)
    if check and check.get("reason") == "unjudged":
        return "n/a"
    if check and check["value"] and (run.judge or {}).get("mode") == "pairwise":
        return str(check["value"])
    return None


def rate_line(view: dict) -> str | None:
    """The pass rate as judged and, for a graded judge, corrected for its error rates."""
    if view["pass_rate"] is None:
        return None
    if view["mode"] == "pairwise":
        pairwise = view.get("pairwise") or {}
        if not pairwise.get("live") or not pairwise.get("compared"):
            return "not lost to live: n/a — nothing was compared"
        if pairwise.get("inconsistent"):  # they never count as not lost (issue 46.5)
            kept = pairwise["compared"] - pairwise["losses"] - pairwise["inconsistent"]
            return (
                f"not lost to live (won or tied, both orders agreeing) {kept:,} of {pairwise['compared']:,}; "
                f"{pairwise['inconsistent']:,} position-inconsistent never count"
            )
        return f"not lost to live (won or tied) {_pct(view['pass_rate'])}{_interval(view['interval'])}"
    line = f"pass rate as judged {_pct(view['pass_rate'])}{_interval(view['interval'])}"
    corrected = view.get("corrected")
    if corrected:
        line += (
            f"; corrected for the judge's error rates {_pct(corrected['estimate'])}{_interval(corrected['interval'])}"
            + (" — the figure min_accuracy bars" if corrected["barred"] else "")
        )
    elif view["mode"] == "graded":
        why = view.get("uncorrected") or "the judge's figures give no sensitivity or specificity"
        line += f"; no corrected rate ({why})"
    return line


def pairwise_line(view: dict) -> str | None:
    pairwise = view.get("pairwise")
    if not pairwise:
        return None
    if not pairwise["live"]:
        return "vs live, judged in both orders: n/a — no live version to compare with"
    return (
        f"vs live, judged in both orders: {pairwise['wins']:,} won, {pairwise['losses']:,} lost, {pairwise['ties']:,} "
        f"tied of {pairwise['compared']:,} ({pairwise['inconsistent']:,} position-inconsistent: the orders disagreed, "
        "counted as ties, never as not lost)"
    )


def sentinel_line(view: dict) -> str | None:
    found = view.get("sentinels")
    if not found:
        return None
    verdict = "DRIFTED" if found["drifted"] else "no drift"
    head = (
        f"sentinels: agreed on {found['agreed']} of {found['judged']} judged ({found['planned']} mixed in), pinned "
        f"{_pct(found['pinned_accuracy'])} of {found['pinned_n']:,}; {found['test']}: "
    )
    if found.get("threshold") is None:  # a run finalized before the drift test read the call order
        return head + f"p = {found['p_value']:.3g}, {verdict}"
    return (
        head + f"statistic {found['cusum']}, alarms at {found['threshold']}: {verdict} "
        f"(whole run: p = {found['p_value']:.3g}, Fisher's exact test)"
    )


def sentinel_power_line(view: dict) -> str | None:
    """What the run's sentinels could have caught: the smallest drift over the last quarter
    of the run caught with 90 % probability, and their false-alarm bound."""
    found = view.get("sentinels") or {}
    power = found.get("power")
    if not power:
        return None
    late = "the last quarter" if power["late"] == 0.25 else f"the last {_whole_pct(power['late'])}"
    alarms = f"false alarms at most {_whole_pct(power['false_alarm'], up=True)} ({100 * power['false_alarm']:.2f} %)"
    if power["to"] is None:
        return (
            f"these {found['planned']} sentinels could not catch, with {_whole_pct(power['probability'])} probability, "
            f"even a judge that stopped agreeing over {late} of the run (raise `sentinels`); {alarms}"
        )
    return (
        f"these {found['planned']} sentinels would catch, with {_whole_pct(power['probability'])} probability, a judge "
        f"whose agreement fell from {_whole_pct(power['from'])} to {_whole_pct(power['to'])} over {late} of the run; "
        f"{alarms}"
    )


def _whole_pct(value: float, up: bool = False) -> str:
    """A share as whole percent ("93 %"); ``up``: rounded up (a bound)."""
    return f"{math.ceil(100 * value - 1e-9) if up else round(100 * value)} %"


def cost_line(view: dict) -> str | None:
    calls = view.get("calls")
    if not calls:
        return None
    parts = []
    for role in ROLES:
        figures = calls.get(role)
        if not figures or (role == "live" and not figures.get("calls") and not figures.get("prompt_tokens")):
            continue
        cost = figures.get("cost_usd")
        parts.append(f"{role} {figures['calls']:,} calls" + (f" ${float(cost):.4f}" if cost is not None else ""))
    return "calls by role: " + ", ".join(parts)


def judge_lines(r) -> list[str]:
    """The text report's lines of a judged run (``r``: a RunReport)."""
    view = r.judge
    if not view:
        return []
    head = f"    judge {safe(view['name'])} v{view['version']}: {view['agreement_line']}"
    if view["trials"] > 1:
        head += f"; {view['trials']} calls per verdict, the majority's"
    lines = [head]
    for line in (rate_line(view), pairwise_line(view), sentinel_line(view), sentinel_power_line(view), cost_line(view)):
        if line:
            lines.append(f"    {line}")
    return lines


def judge_said(judge: dict | None) -> str | None:
    """A failing item's judging in a line: what the judge said (each order, compared)."""
    if not judge:
        return None
    if judge.get("checks_failed"):  # a check failed: not judged (gate.prompt.checks)
        return "failed check " + ", ".join(str(n) for n in judge["checks_failed"])
    if judge.get("orders"):
        said = "; ".join(f"{o['a']} first: {o['label'] or '(invalid)'}" for o in judge["orders"])
        return f"{judge.get('outcome')} ({said})"
    label, said = judge.get("label") or "(invalid)", (judge.get("said") or "").strip()
    return label if said in ("", label) else f"{label}: {said}"
