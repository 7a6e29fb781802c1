"""The report's sections beyond item accuracy, from a finished run's metrics: per field
(accuracy with its Wilson interval, live against candidate with flips, the fields most
often wrong, a label field's confusion matrix), per slice (the same, and whether the slice
is large enough to be judged), the protected items that broke, and the accepted breaks.
``update_report.run_report`` puts them on the ``RunReport``; the text and Markdown reports
render them. No database here."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gate.records.metrics import RunMetrics
from gate.verdict.reasons import plain_bar, plain_miss
from gate.verdict.stats import wilson_interval

MOST_WRONG = 3


def _interval(successes: int, n: int) -> list[float] | None:
    found = wilson_interval(successes, n)
    return list(found) if found else None


def _share(successes: int, n: int) -> dict[str, Any]:
    return {"accuracy": successes / n if n else None, "interval": _interval(successes, n)}


def fields_view(metrics: RunMetrics) -> dict | None:
    """Per field of a fields decision, live beside it where compared; None otherwise."""
    figures = metrics.get("fields")
    if not figures:
        return None
    items, flips = figures["items"], metrics.get("field_flips") or {}
    rows = []
    for f in figures["fields"]:
        live = flips.get(f["field"])
        of = f.get("compared", items)  # a tool call's argument: the items whose expected call has it
        rows.append(
            {
                "field": f["field"],
                "type": f["type"],
                "right": f["right"],
                "of": of,
                "wrong": f["wrong"],
                "missing": f["missing"],
                **_share(f["right"], of),
                "live": None
                if not live
                else {**_share(live["live_right"], live["paired"]), "fixed": live["fixed"], "broken": live["broken"]},
            }
        )
    wrong = sorted((f for f in rows if f["wrong"]), key=lambda f: (-f["wrong"], f["field"]))
    return {
        "items": items,
        "not_object": metrics.get("invalid", 0),
        "fields": rows,
        "most_wrong": [f["field"] for f in wrong[:MOST_WRONG]],
        "confusion": {name: _matrix(matrix) for name, matrix in sorted((figures.get("confusion") or {}).items())},
    }


def _matrix(matrix: dict[str, dict[str, int]]) -> dict[str, Any]:
    """A confusion matrix as rows: the answered labels (columns) and each expected one."""
    answered = sorted({a for row in matrix.values() for a in row})
    return {
        "labels": answered,
        "rows": [[expected, [matrix[expected].get(a, 0) for a in answered]] for expected in sorted(matrix)],
    }


def slices_view(metrics: RunMetrics) -> dict | None:
    sliced = metrics.get("slices")
    if not sliced:
        return None
    rows = []
    for s in sliced["slices"]:
        row = {
            "value": s["value"],
            "items": s["items"],
            "matches": s["matches"],
            **_share(s["matches"], s["items"]),
            "judged": s["items"] >= sliced["min_items"],
            "live": None,
        }
        if "live_matches" in s:
            row["live"] = {**_share(s["live_matches"], s["items"]), "fixed": s["fixed"], "broken": s["broken"]}
        rows.append(row)
    return {
        "column": sliced["column"],
        "min_items": sliced["min_items"],
        "too_many": sliced["too_many"],
        "slices": rows,
    }


def protected_view(metrics: RunMetrics) -> dict | None:
    protected = metrics.get("protected")
    if not protected or not protected.get("items"):
        return None
    return {"items": protected["items"], "broken": protected["broken"], "samples": protected.get("samples") or []}


def accepted_view(metrics: RunMetrics) -> list[dict]:
    return [dict(a) for a in metrics.get("accepted_breaks") or ()]


def partly_paired(compared: dict | None) -> bool:
    """A comparison made on fewer items than one side scored (a stopped candidate scored 4
    where live scored 16): "on the same items" then says on how many."""
    if not compared:
        return False
    paired = compared.get("paired") or 0
    return paired < max(compared.get("scored") or 0, compared.get("live_scored") or 0)


def accuracy_state(run: Any, overall: str) -> str:
    """The summary row's result: its accuracy bar's own (a run that cleared accuracy and
    failed another bar reads "pass" there, the failing bar named in the headline), or the
    run's ``overall`` result where accuracy has no check of its own (still open, stopped)."""
    if run.stop or run.not_judged:
        return overall
    found = next((c for c in run.checks or () if c["bar"] == "min_accuracy"), None)
    return str(found["state"]) if found and found["state"] in ("pass", "fail") else overall


def failed_bars(runs: Iterable[Any]) -> list[str]:
    """Every bar a finished run failed, in plain words, its dataset first: "invoices: amount
    read right on 50.0 % of items, needs 85 %" (``reasons.plain_miss``)."""
    return [
        f"{r.dataset}: {plain_miss(c['bar'], c['label'], c['value'], c['limit'])}"
        for r in runs
        for c in r.checks or ()
        if c["state"] == "fail"
    ]


def headline_miss(runs: Iterable[Any]) -> str | None:
    """The first failed bar for a headline, and how many more: "invoices: amount read right
    on 50.0 % of items, needs 85 % (and 1 more bar)"; None when no bar failed."""
    found = failed_bars(runs)
    if not found:
        return None
    more = len(found) - 1
    return found[0] + (f" (and {more} more bar{'s' if more != 1 else ''})" if more else "")


def bar_name(check: dict) -> str:
    """A check's bar by its one plain name (``reasons.plain_bar``), as every surface shows it."""
    return plain_bar(str(check["bar"]), check.get("label"))


def update_outcome(u: Any, rollout_state: str | None) -> str:
    """The badge beside an update's status: an APPLIED update's canary's state (CANARY,
    PROMOTED, ROLLED_BACK, …: gate.report.canary), or NOT_JUDGED for one an admin accepted
    without a judge (gate.report.unjudged): no ✅ about what nothing judged, nor about a
    canary production rolled back."""
    from gate.report import canary, unjudged
    from gate.states import UpdateStatus

    found = canary.outcome(u.status, {"status": rollout_state} if rollout_state else None)
    return unjudged.OUTCOME if found == UpdateStatus.APPLIED and unjudged.not_judged(u) else found
