"""The trials of a run's items (``prompt_run_item.trials``, gate/prompt/trials.py): the unstable
items (their trials disagree) a report lists first, and the calls behind a run with
trials, counted per call (each trial is one), not per item."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from gate.prompt.trials import answers_shown
from gate.records import UnstableItem
from gate.states import Verdict
from gate.verdict.stats import nearest_rank

from .schema import prompt_run_item


def count_unstable(conn: Connection, run_id: int) -> int:
    i = prompt_run_item
    return int(conn.execute(select(func.count()).where(i.c.run_id == run_id, i.c.unstable == 1)).scalar_one())


def unstable_items(conn: Connection, run_id: int, limit: int) -> list[UnstableItem]:
    """The run's first ``limit`` unstable items (dataset order), with each trial's answer."""
    if limit <= 0:
        return []
    i = prompt_run_item
    rows = conn.execute(
        select(i.c.item_id, i.c.expected_decision, i.c.actual_decision, i.c.verdict, i.c.trials)
        .where(i.c.run_id == run_id, i.c.unstable == 1)
        .order_by(i.c.position)
        .limit(limit)
    )
    return [
        UnstableItem(r.item_id, r.expected_decision, r.actual_decision, r.verdict, answers_shown(r.trials or []))
        for r in rows
    ]


def trial_call_stats(conn: Connection, run_id: int) -> dict[str, Any]:
    """``items.call_stats`` for a run with trials, over its answered items' trials: latency
    p50/p95/max of the calls (nearest rank), tokens summed over every trial, answers
    reused, trials answered without token counts (``unmetered``), and ``calls``: the
    trials the answered items took (N × items; failed trials included)."""
    i = prompt_run_item
    rows = conn.execute(
        select(i.c.trials).where(i.c.run_id == run_id, i.c.verdict.in_([Verdict.MATCH, Verdict.MISMATCH]))
    )
    # the column's type: a JSON list of the item's trials, or NULL
    trials = [t for (stored,) in cast("Iterable[tuple[list[dict[str, Any]] | None]]", rows) for t in stored or []]
    answered = [t for t in trials if not t.get("error") and t.get("decision") is not None]
    return {
        "latency_ms": _latency(sorted(t["latency_ms"] for t in answered if t.get("latency_ms") is not None)),
        "prompt_tokens": sum(t.get("prompt_tokens") or 0 for t in answered),
        "completion_tokens": sum(t.get("completion_tokens") or 0 for t in answered),
        "reused": sum(1 for t in answered if t.get("reused_update_id") is not None),
        "unmetered": sum(1 for t in answered if t.get("prompt_tokens") is None or t.get("completion_tokens") is None),
        "calls": len(trials),
    }


def _latency(values: Sequence[int]) -> dict[str, Any]:
    if not values:
        return {"p50": None, "p95": None, "max": None, "timed": 0}
    return {
        "p50": values[nearest_rank(50, len(values)) - 1],
        "p95": values[nearest_rank(95, len(values)) - 1],
        "max": values[-1],
        "timed": len(values),
    }
