"""The figures of a run beyond its item verdicts, each computed once per run from its
stored items, in the database (``gate.store.fields``), never per chunk: finalize adds a
fields decision's per-field figures (``fields_metrics``)."""

from __future__ import annotations

from typing import Any

from gate import store
from gate.structured.compare import label_named
from gate.structured.rule import FieldsRule

MISSING, OTHER = "(missing)", "(other)"     # a label field's answer: not given, or none of its labels


def fields_metrics(conn, run_id: int, rule: FieldsRule) -> dict[str, Any]:
    """Per field: right, wrong and missing over the items scored; per label field its
    confusion matrix (expected label → answered label, ``(missing)`` or ``(other)``)."""
    counts = store.field_counts(conn, run_id, len(rule.fields))
    scored = counts["scored"]
    fields = [{"field": f.name, "type": f.type, "right": scored - counts["wrong"][i], "wrong": counts["wrong"][i],
               "missing": counts["missing"][i]} for i, f in enumerate(rule.fields)]
    confusion = {}
    for f in rule.fields:
        if f.type == "label":
            matrix: dict[str, dict[str, int]] = {}
            for expected, actual, n in store.label_confusion(conn, run_id, f.name, rule.bit(f.name), f.labels,
                                                               MISSING, OTHER):
                row = matrix.setdefault(label_named(expected, f.labels) or str(expected), {})
                row[actual] = row.get(actual, 0) + n
            confusion[f.name] = matrix
    return {"items": scored, "fields": fields, "confusion": confusion}
