"""What a run's figures hold (``prompt_run.metrics``), key by key: finalize writes the counts,
the calls, the cost and the spend; reconcile adds the comparison with live, the policy's
figures and a stop's confirmation. A TypedDict, not a record: the figures are JSON all the
way (stored, handed out in reports as they are, merged with a stop's best case), so the type
names the keys and what each holds, and the type checker holds every read to them. A row
written before a key existed lacks it: every key is optional."""

from __future__ import annotations

from typing import Any, TypedDict


class RunMetrics(TypedDict, total=False):
    # finalize: the counts (gate.verdict.scoring.metrics_from_breakdown)
    total: int  # items: the dataset version's rows (a stopped run's never copied counted)
    scored: int
    matches: int
    mismatches: int
    errors: int
    pending: int
    stopped: int  # items never answered: the run stopped first
    invalid: int  # answers that named no decision
    accuracy: float | None
    confusion: dict[str, dict[str, int]]  # expected -> actual -> items
    fields: dict[str, Any]  # a fields decision: per field (workers.figures.fields_metrics)
    error_kinds: dict[str, int]  # kind -> items
    item_detail: dict[str, Any]  # what a reason leaves out (gate.verdict.reasons.ITEM_DETAIL)
    tool_calls: dict[str, Any]  # a tool_call decision's marked answers (workers.tool_figures)
    schema: dict[str, Any]  # answers off a strict schema
    # finalize: the calls and their cost (workers.finalize.call_metrics)
    calls: dict[str, Any]  # latency and tokens; reused
    cost_usd: str | None  # exact decimal text
    cost_note: str  # why there is no cost
    unstable: int  # items whose trials disagree
    calls_made: int
    calls_unrecorded: int
    calls_reused: int
    calls_saved: int
    judge: dict[str, Any]  # a judged run's figures (workers.judge_figures)
    # reconcile: the comparison with live, the policy, the stop
    flips: dict[str, int] | None  # fixed, broken, both right, both wrong, paired
    live: dict[str, Any]  # live's matches and scored, and which run
    baseline_note: str | None
    baseline_error: str | None
    field_flips: dict[str, Any]
    slices: dict[str, Any]
    protected: dict[str, Any]
    accepted_breaks: list[dict[str, Any]]
    stop: dict[str, Any]  # kind; once confirmed: sentence, missed, best
