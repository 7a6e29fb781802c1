"""The plain-text report's lines for a fields decision, slices, protected items and accepted
breaks (``gate.report.text`` puts them in place). Everything that comes from a dataset, a model
or a gate config goes through ``terminal_safe``."""

from __future__ import annotations

import json
from typing import Any

from gate.untrusted import terminal_safe as safe


def protected_lines(report) -> list[str]:
    """The protected items that broke, first in the report."""
    lines = []
    for r in report.runs:
        p = r.protected
        if not p or not p["broken"]:
            continue
        shown = f"first {len(p['samples'])} of {p['broken']}" if p["broken"] > len(p["samples"]) else str(p["broken"])
        lines.append(f"  PROTECTED ITEMS BROKEN in {safe(r.dataset)} ({shown}; live answered them right):")
        for s in p["samples"]:
            lines.append(
                f"    {safe(s['item_id'])}: expected {answer(s['expected_decision'], s.get('wrong_fields'))}, "
                f"candidate said {answer(s['candidate_decision'], s.get('wrong_fields'), True)}"
            )
    return lines


def answer(decision: Any, wrong: list[dict] | None = None, actual: bool = False) -> str:
    """A decision as a report line shows it: a label; for a fields decision, only the
    fields that did not match (expected, or read: "missing")."""
    if wrong is None:
        return safe(decision or "")
    if not actual:  # a problem of the answer (``(schema)``, ``(arguments)``) has no expected value
        wrong = [w for w in wrong if not str(w["field"]).startswith("(")]
    if not wrong:
        return "(every field right)"
    parts = []
    for w in wrong:
        value = "missing" if actual and w["missing"] else value_text(w["actual"] if actual else w["expected"])
        if actual and w["missing"] and w.get("sent_to"):  # the expected function was not called
            value = f"sent to {safe(w['sent_to'], 64)} instead"
        parts.append(f"{safe(w['field'], 64)}={value}")
    return ", ".join(parts)


def value_text(value: Any, limit: int = 60) -> str:
    return safe(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False), limit)


def check_lines(r) -> list[str]:
    """Per check (a decision with checks): the share of the items scored that passed it."""
    c = getattr(r, "check_rates", None)
    if not c:
        return []
    shown = [f"{safe(x['check'], 64)} {_rate(x['rate'])} ({x['passed']}/{c['items']})" for x in c["checks"]]
    return ["    checks passed: " + ", ".join(shown)]


def _rate(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate * 100:.1f}%"


def field_lines(r) -> list[str]:
    """Per field: accuracy [interval], wrong (missing), live and flips; the most often wrong."""
    f = r.fields
    if not f:
        return []
    not_object = f"{f['not_object']} answer{'s' if f['not_object'] != 1 else ''} not a JSON object"
    lines = [f"    fields ({f['items']} items" + (f", {not_object}" if f["not_object"] else "") + "):"]
    for x in f["fields"]:
        live = x["live"]
        vs = (
            f"; live {pct(live['accuracy'], live['interval'])}, fixed {live['fixed']}, broken {live['broken']}"
            if live
            else ""
        )
        lines.append(
            f"      {safe(x['field'], 64)} ({x['type']}): {pct(x['accuracy'], x['interval'])}, "
            f"{x['wrong']} wrong ({x['missing']} missing){vs}"
        )
    if f["most_wrong"]:
        lines.append("      most often wrong: " + ", ".join(safe(n, 64) for n in f["most_wrong"]))
    return lines


def slice_lines(r) -> list[str]:
    s = r.slices
    if not s:
        return []
    lines = [
        f"    slices by {safe(s['column'], 64)} (judged from {s['min_items']} items"
        + ("; over the limit of distinct values" if s["too_many"] else "")
        + "):"
    ]
    for x in s["slices"]:
        live = x["live"]
        vs = (
            f"; live {pct(live['accuracy'], live['interval'])}, fixed {live['fixed']}, broken {live['broken']}"
            if live
            else ""
        )
        judged = "" if x["judged"] else " — too small to judge"
        lines.append(
            f"      {slice_value(x['value'])}: {pct(x['accuracy'], x['interval'])} of {x['items']}{vs}{judged}"
        )
    return lines


def slice_value(value: Any) -> str:
    return "(none)" if value is None else safe(value, 100)


def accepted_lines(r) -> list[str]:
    lines = []
    for a in r.accepted_breaks:
        commit = f"accepted in commit {a['commit'][:12]}" if a.get("commit") else "no commit given"
        lines.append(
            f"    accepted break {safe(a['item'], 100)}: {STATES.get(a['state'], a['state'])} — "
            f"{safe(a['reason'], 200)} ({commit})"
        )
    return lines


STATES = {
    "broke": "broke (accepted)",
    "stale": "STALE (did not break)",
    "absent": "STALE (no such item)",
    "unchecked": "not checked (no live version)",
}


def pct(value, interval) -> str:
    if value is None:
        return "n/a"
    return f"{100 * value:.1f}%" + (f" [{100 * interval[0]:.1f}–{100 * interval[1]:.1f}]" if interval else "")
