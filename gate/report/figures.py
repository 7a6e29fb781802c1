"""The report's sections beyond item accuracy, from a finished run's metrics: per field
(accuracy with its Wilson interval, live against candidate with flips, the fields most
often wrong, a label field's confusion matrix), per slice (the same, and whether the slice
is large enough to be judged), the protected items that broke, and the accepted breaks.
``update_report.run_report`` puts them on the ``RunReport``; the text and Markdown reports
render them. No database here."""

from __future__ import annotations

from typing import Any

from gate.records.metrics import RunMetrics
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
