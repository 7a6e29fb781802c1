"""The report's view of prompts that call tools or are held to a strict schema: per run,
the answers marked by their reading (arguments not JSON, off their function's schema),
the parallel calls (expected, answered, right), the arguments most often wrong, and the
answers off the prompt's strict schema; per failing item, the expected and the actual call
side by side. (The function's confusion matrix and each argument's accuracy with its
interval and flips against live are the fields view's, ``gate.report.figures``.) No
database here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gate.prompt.structured.reading import parse_read
from gate.prompt.structured.rule import FUNCTION_FIELD, NO_CALL
from gate.prompt.tool_decision import PROBLEM_KEY, expected_object, shown_calls
from gate.records import ItemSample
from gate.records.metrics import RunMetrics
from gate.untrusted import terminal_safe as safe

MOST_WRONG = 3
CALL_LINE = "→ "  # an answer's call, as the executor keeps it after the text (gate.calls.llm.CallResult.output)


def tool_calls_view(metrics: RunMetrics, fields: dict | None) -> dict | None:
    """A tool_call decision's marked answers, parallel calls and arguments most often
    wrong; None for a run of another decision (or not finalized)."""
    figures = metrics.get("tool_calls")
    if not figures:
        return None
    wrong = sorted(
        (f for f in (fields or {}).get("fields") or () if f["field"] != FUNCTION_FIELD and f["wrong"]),
        key=lambda f: (-f["wrong"], f["field"]),
    )
    return {
        "arguments_not_json": figures.get("arguments_not_json", 0),
        "arguments_off_schema": figures.get("arguments_off_schema", 0),
        "parallel": figures.get("parallel") or {"expected": 0, "answered": 0, "right": 0},
        "arguments_most_wrong": [{"field": f["field"], "wrong": f["wrong"], "of": f["of"]} for f in wrong[:MOST_WRONG]],
    }


def schema_view(metrics: RunMetrics) -> dict | None:
    """How many answers broke the prompt's strict schema (``response_format: json_schema``)."""
    figures = metrics.get("schema")
    return {"broken": figures.get("broken", 0)} if figures else None


def with_calls(decision: Mapping[str, Any] | None, samples: list[ItemSample]) -> list[ItemSample]:
    """A tool_call decision's failing items, each with its expected and actual call side by
    side (``call``: expected, actual, and the problem of the arguments, if any)."""
    from gate.kinds import kind_of  # the prompt's parts: only for a report that shows items

    view = kind_of(decision).call_view(decision)
    if view is None:
        return samples
    by_fields = view == "fields"
    return [
        replace(s, call=_fields_call(s) if by_fields else _label_call(s)) if s.verdict == "MISMATCH" else s
        for s in samples
    ]


def _fields_call(sample: ItemSample) -> dict[str, Any]:
    read = parse_read(sample.actual_decision) or {}
    return {
        "expected": shown_calls(expected_object(sample.expected_decision)),
        "actual": shown_calls(read) if read else (sample.actual_decision or ""),
        "problem": read.get(PROBLEM_KEY),
    }


def _label_call(sample: ItemSample) -> dict[str, Any]:
    calls = [line[len(CALL_LINE) :] for line in (sample.raw_output or "").splitlines() if line.startswith(CALL_LINE)]
    actual = sample.actual_decision or ""
    problem = actual if actual.startswith("(arguments") else None
    return {"expected": sample.expected_decision, "actual": " + ".join(calls) or NO_CALL, "problem": problem}


# --- the plain-text report -------------------------------------------------------------------


def tool_lines(r) -> list[str]:
    """A run's tool calls and strict schema, in the plain-text report."""
    lines = []
    t = r.tool_calls
    if t:
        p = t["parallel"]
        wrong = ", ".join(f"{safe(w['field'], 64)} ({w['wrong']} of {w['of']})" for w in t["arguments_most_wrong"])
        lines.append(
            f"    tool calls: arguments not JSON {t['arguments_not_json']}, off their schema "
            f"{t['arguments_off_schema']}; several calls expected on {p['expected']} items ({p['right']} right), "
            f"made on {p['answered']}" + (f"; arguments most often wrong: {wrong}" if wrong else "")
        )
    if r.schema:
        lines.append(f"    response schema: {r.schema['broken']} answers broke it (MISMATCH, marked (schema))")
    return lines


def failure_line(f: ItemSample) -> list[str]:
    """A failing item of a tool call or a conversation: the expected and the actual call,
    then the conversation's last turns; [] for another item (the report's own line)."""
    if f.call is None and not f.turns:
        return []
    if f.call is not None:
        problem = f" ({safe(f.call['problem'], 120)})" if f.call.get("problem") else ""
        got = "error: " + safe(f.error or "", 80) if f.verdict == "ERROR" else safe(f.call["actual"], 200) + problem
        lines = [f"    {safe(f.item_id)}: expected {safe(f.call['expected'], 200)}, got {got}"]
    else:
        got = safe(f.error or "", 80) if f.verdict == "ERROR" else safe(f.actual_decision or f.verdict)
        lines = [f"    {safe(f.item_id)}: expected {safe(f.expected_decision)}, got {got}"]
    return lines + [f"      {safe(t['role'])}: {safe(t['text'], 120)}" for t in f.turns or ()]
