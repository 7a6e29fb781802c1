"""A run's broken and failing items as rows both surfaces print side by side (the comment's
``items_table.md.j2``, the status page's ``sections/items.html.j2``): the input's first
lines (a conversation as its turns), live's answer, the candidate's, and for a judged run
the judge's verdict and its reason in columns of their own; for a decision field by field
(a tool call's arguments too) only the fields that differ, each ``field: before → after``.

Plain values only, every one cut here (``FIRST_LINES``, ``CELL``): the templates escape
(``md`` for Markdown, autoescape on the page). An item's own text never becomes a key."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gate.untrusted import CONTROL

FIRST_LINES = 3  # the input's first lines (a conversation's last turns)
LINE = 90  # characters of one input line
CELL = 160  # characters of an answer


def table_mode(run: Any) -> str:
    """How the run's items are drawn: ``checks`` (a checks decision: the checks each failed),
    ``judged`` (the judge's verdict and reason; a check failed before it: its checks),
    ``fields`` (only the fields that differ), ``call`` (the function expected and the one
    called), ``label``."""
    if _decided_by(run) == "checks":
        return "checks"
    if run.judge is not None or _decided_by(run) == "judge" or any(_judging(s) for s in [*run.broken, *run.failures]):
        return "judged"
    if any(getattr(s, "wrong_fields", None) is not None for s in [*run.broken, *run.failures]):
        return "fields"
    if any(s.call is not None for s in run.failures):
        return "call"
    return "label"


def _decided_by(run: Any) -> str | None:
    """The type of the run's pinned decision (``checks``, ``judge``, …; None: not pinned)."""
    decision = (getattr(run, "pinned", None) or {}).get("decision")
    return decision.get("type") if isinstance(decision, dict) else None


def expected_columns(failing: Sequence[Any], unstable: Sequence[Any]) -> dict[str, bool]:
    """Do the failing and the unstable items' tables have an expected column: not when no
    item of theirs has an expected value (a dataset without labels, ``fields.unlabelled``: a
    judged or checks prompt's), never an empty column."""
    return {
        "expected_shown": any(_expected_of(f) for f in failing),
        "unstable_expected": any(u.expected_decision for u in unstable),
    }


def _expected_of(f: Any) -> Any:
    return (f.call or {}).get("expected") or f.expected_decision


def _judging(sample: Any) -> bool:
    return bool(getattr(sample, "judge", None))


def one_line(value: Any, limit: int) -> str:
    """``value`` on one line (JSON for what is not text), at most ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    text = " ".join(CONTROL.sub("", text).split())  # no control or bidi-override character (gate.untrusted)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def input_lines(sample: Any) -> list[dict[str, str | None]]:
    """The item's input as a few lines, each ``{"role", "text"}``: a conversation's last turns
    (role: who spoke), else the input's first fields (role: the field's name), else its text."""
    turns = getattr(sample, "turns", None)
    if turns:
        return [
            {"role": one_line(t.get("role"), 20), "text": one_line(t.get("text"), LINE)} for t in turns[-FIRST_LINES:]
        ]
    value = getattr(sample, "input", None)
    if value is None:
        return []
    if isinstance(value, dict):
        conversation = _conversation(value)
        if conversation:
            return conversation[-FIRST_LINES:]
        return [{"role": one_line(k, 30), "text": one_line(v, LINE)} for k, v in list(value.items())[:FIRST_LINES]]
    return [{"role": None, "text": one_line(value, LINE)}]


def _conversation(value: dict) -> list[dict[str, str | None]]:
    """An input holding a conversation (a list of ``{role, content}``): its turns."""
    for v in value.values():
        if isinstance(v, list) and v and all(isinstance(t, dict) and "role" in t for t in v):
            return [{"role": one_line(t.get("role"), 20), "text": _turn_text(t)} for t in v]
    return []


def _turn_text(turn: dict) -> str:
    content = turn.get("content")
    if content is None:  # an assistant's turn that only called tools
        return "(a tool call)" if turn.get("tool_calls") else ""
    return one_line(content, LINE)


MOST_TURNS = 12  # a conversation's turns the dataset page draws


def turns_of(value: Any) -> list[dict[str, str | None]]:
    """A dataset row's input as the dataset page draws it: its conversation's first turns
    (each line cut, at most ``MOST_TURNS``, then how many more), or none when it holds no
    conversation."""
    turns = _conversation(value) if isinstance(value, dict) else []
    if len(turns) > MOST_TURNS:
        return [*turns[:MOST_TURNS], {"role": "…", "text": f"{len(turns) - MOST_TURNS} more turns"}]
    return turns


def changes(wrong_fields: Sequence[dict] | None) -> list[dict[str, Any]]:
    """Only the fields that differ: ``field``, ``before`` (expected), ``after`` (answered;
    None: missing), ``missing``."""
    out = []
    for w in wrong_fields or ():
        field = str(w.get("field"))
        problem = field.startswith("(")  # (schema), (arguments): a problem of the answer, no expected value
        out.append(
            {
                "field": one_line(field, 64),
                "before": None if problem else one_line(w.get("expected"), 60),
                "after": None if w.get("missing") else one_line(w.get("actual"), 60),
                "missing": bool(w.get("missing")),
            }
        )
    return out


def checks_failed(sample: Any) -> list[str]:
    """The checks the item failed (a decision with checks: kept with its judging)."""
    found = getattr(sample, "checks_failed", None) or (getattr(sample, "judge", None) or {}).get("checks_failed")
    return [one_line(n, 64) for n in found or ()] if isinstance(found, list) else []


def _reason(judge: dict | None) -> tuple[str | None, str | None]:
    """The judge's verdict and its reason, apart (a comparison: its outcome, each order's
    label; an item that failed a check before the judge: "failed check", and which)."""
    if not judge:
        return None, None
    if judge.get("checks_failed"):  # never judged (gate.prompt.checks)
        return "failed check", one_line(", ".join(str(n) for n in judge["checks_failed"]), CELL)
    if judge.get("orders"):
        said = "; ".join(f"{o.get('a')} first: {o.get('label') or '(invalid)'}" for o in judge["orders"])
        return one_line(judge.get("outcome"), 40), one_line(said, CELL)
    label, said = judge.get("label") or "(invalid)", (judge.get("said") or "").strip()
    return one_line(label, 40), (None if said in ("", label) else one_line(said, CELL))


def broken_row(b: Any) -> dict[str, Any]:
    verdict, reason = _reason(getattr(b, "judge", None))
    return {
        "item_id": b.item_id,
        "input": input_lines(b),
        "expected": one_line(b.expected_decision, 60),
        "live": one_line(b.live_decision or "", 60),
        "candidate": one_line(b.candidate_decision or "", 60),
        "live_answer": one_line(b.live_output or "", CELL) if b.live_output else None,
        "answer": one_line(b.candidate_output or "", CELL) if b.candidate_output else None,
        "changes": changes(b.wrong_fields) if b.wrong_fields is not None else None,
        "verdict": verdict or one_line(b.candidate_decision or "", 40),
        "live_verdict": one_line(b.live_decision or "", 40),
        "reason": reason,
        "checks_failed": checks_failed(b),
        "error": None,
    }


def failing_row(f: Any) -> dict[str, Any]:
    verdict, reason = _reason(f.judge)
    error = one_line(f.error or "", CELL) if f.verdict == "ERROR" else None
    call = f.call or {}
    live_answer = (f.judge or {}).get("live_answer")
    return {
        "item_id": f.item_id,
        "input": input_lines(f),
        "expected": one_line(call.get("expected") or f.expected_decision, 60),
        "candidate": one_line(call.get("actual") or f.actual_decision or "", 60),
        "problem": one_line(call["problem"], 80) if call.get("problem") else None,
        "live_answer": one_line(live_answer, CELL) if live_answer else None,
        "answer": one_line(f.raw_output, CELL) if f.raw_output else None,
        "changes": changes(f.wrong_fields) if f.wrong_fields is not None and error is None else None,
        "verdict": verdict,
        "reason": reason,
        "checks_failed": checks_failed(f),
        "error": error,
    }


def rows_of(broken: Sequence[Any], failing: Sequence[Any]) -> list[dict[str, Any]]:
    """The rows of both tables, broken first."""
    return [*map(broken_row, broken), *map(failing_row, failing)]
