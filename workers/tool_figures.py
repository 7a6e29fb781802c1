"""The figures of runs whose answers are tool calls (``gate.prompt.tool_decision``) or are held
to a strict schema (``gate.prompt.answer_schema``), each counted once per run in the database
(``gate.store.tool_calls``): finalize's per-argument figures and the function's confusion
matrix (``call_fields_metrics``, in place of a fields decision's), the marked answers
(``call_marks``, ``schema_metrics``); reconcile's per-argument flips against live are
``gate.store.tool_calls.argument_flips`` (``workers.figures``)."""

from __future__ import annotations

from typing import Any

from gate.prompt.answer_schema import SCHEMA_MARK
from gate.prompt.structured.rule import FUNCTION_FIELD, NO_CALL, CallRule
from gate.prompt.tool_decision import LABEL_NOT_JSON, LABEL_OFF_SCHEMA, NOT_JSON, OFF_SCHEMA, PROBLEM_KEY
from gate.records import Run
from gate.store.tool_calls import argument_counts, function_confusion, marked_counts, parallel_counts

SEVERAL, OTHER = "(several)", "(other)"  # calls to several functions; a function none of the declared
MARKERS = {
    "arguments_not_json": (LABEL_NOT_JSON, f'{{"{PROBLEM_KEY}":"{NOT_JSON}'),
    "arguments_off_schema": (LABEL_OFF_SCHEMA, f'{{"{PROBLEM_KEY}":"{OFF_SCHEMA}'),
}
SCHEMA_MARKERS = {"broken": (SCHEMA_MARK, f'{{"{SCHEMA_MARK}":')}


def call_fields_metrics(conn, run_id: int, rule: CallRule) -> dict[str, Any]:
    """Per field of a tool_call decision: compared, right, wrong, missing (an argument over
    the items that expect it); the function's confusion matrix."""
    counts = argument_counts(conn, run_id, len(rule.fields))
    fields = [
        {
            "field": f.name,
            "type": f.type,
            "compared": counts["compared"][i],
            "right": counts["compared"][i] - counts["wrong"][i],
            "wrong": counts["wrong"][i],
            "missing": counts["missing"][i],
        }
        for i, f in enumerate(rule.fields)
    ]
    matrix: dict[str, dict[str, int]] = {}
    for expected, actual, n in function_confusion(conn, run_id, rule.functions + (NO_CALL,), SEVERAL, OTHER):
        row = matrix.setdefault(expected, {})
        row[actual] = row.get(actual, 0) + n
    return {"items": counts["scored"], "fields": fields, "confusion": {FUNCTION_FIELD: matrix}}


def call_marks(conn, run_id: int, with_fields: bool) -> dict[str, Any]:
    """A tool_call decision's marked answers and parallel calls (its kind's ``tool_calls``,
    ``gate.kinds.tool_call``)."""
    figures: dict[str, Any] = marked_counts(conn, run_id, MARKERS)
    figures["parallel"] = parallel_counts(conn, run_id, '{"calls":%' if with_fields else "%+%")
    return figures


def schema_metrics(conn, run: Run) -> dict[str, Any]:
    """The answers off a strict schema (``schema``); nothing for a run without one."""
    decision = run.pinned.decision or {}
    out: dict[str, Any] = {}
    if decision.get("answer_schema"):
        out["schema"] = marked_counts(conn, run.id, SCHEMA_MARKERS)
    return out
