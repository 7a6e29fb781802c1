"""What a submission pins about spending (gate.calls.spend_caps): the gate's spend caps as the
default branch's gate config set them, and the upper bound of the update's calls — items ×
trials of each candidate run, plus those of each live version it scores alongside (a live
version already scored on the pinned dataset version needs none). A cost cap needs every
call's cost bounded before it is made, so a candidate or live version without a price or a
``max_tokens`` is refused while a cost cap is set."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gate.calls.spend_caps import SpendLimits, nano_text, output_bound
from gate.errors import UsageError
from gate.store.answers import reuse_stats
from gate.store.spend import list_limits, spend_of_update
from gate.store.stops import read_tally, unrecorded_claims

if TYPE_CHECKING:  # the prompt's parser (Jinja2, YAML) is loaded by what reads a prompt, not by this module
    from gate.prompt.spec import PromptSpec


def gate_limits(conn) -> SpendLimits:
    return SpendLimits.from_rows(list_limits(conn))


def check_cost_bounded(limits: SpendLimits, spec: PromptSpec, price: dict | None, whose: str) -> None:
    """Refuse a submission whose calls' cost could not be bounded under a cost cap."""
    if limits.max_cost_per_update_usd is None:
        return
    if price is None:
        raise UsageError(
            f"the gate's max_cost_per_update_usd needs a price for every model it calls: {whose} calls "
            f"{spec.model!r}, which the gate config's prices: does not name"
        )
    if output_bound(spec.params) is None:
        raise UsageError(
            f"the gate's max_cost_per_update_usd needs each call's cost bounded before it is made: "
            f"{whose} sets no params.max_tokens (or max_completion_tokens)"
        )


def run_calls(spec: PromptSpec, rows: int) -> int:
    """The most calls a run of ``spec`` over ``rows`` items makes (every trial of every item)."""
    return rows * spec.trials


def pinned_limits(limits: SpendLimits, calls_bound: int) -> dict[str, Any]:
    """The update's ``limits`` column: its caps and the upper bound of its calls."""
    return {
        "max_calls_per_update": limits.max_calls_per_update,
        "max_cost_per_update_usd": limits.rows().get("max_cost_per_update_usd"),
        "calls_bound": calls_bound,
    }


def update_spend(conn, upd, runs: list) -> dict[str, Any]:
    """What the update spent on calls, over all its runs (the live version's scored
    alongside too): calls made (recorded), at most how many more may have been made and
    not recorded (claims no write-back settled: of a finished run, lost with workers that
    died; of an open one, in flight too), answers reused, calls saved by a stop; with the
    upper bound and the caps pinned at submit, and the cost reserved under a cost cap. A finished run's
    figures are finalize's, its calls counted again from its tally (a call in flight when
    its run stopped is counted when it answers, after finalize); an open run's are read from
    its tally and its items."""
    made = unrecorded = reused = saved = 0
    open_runs = [r.id for r in runs if "calls_made" not in (r.metrics or {})]
    reuse = reuse_stats(conn, open_runs)
    for run in runs:
        metrics = run.metrics or {}
        made += max(read_tally(conn, run.id)[1], metrics.get("calls_made", 0))
        unrecorded += unrecorded_claims(conn, run.id) * run.pinned.calls_per_item
        if run.id in reuse:
            reused += sum(reuse[run.id].values())
        else:
            reused, saved = reused + metrics.get("calls_reused", 0), saved + metrics.get("calls_saved", 0)
    limits = upd.limits or {}
    cost_cap = limits.get("max_cost_per_update_usd")
    return {
        "calls_bound": limits.get("calls_bound"),
        "max_calls_per_update": limits.get("max_calls_per_update"),
        "max_cost_per_update_usd": cost_cap,
        "calls_made": made,
        "calls_unrecorded": unrecorded,
        "calls_reused": reused,
        "calls_saved": saved,
        "cost_reserved_usd": nano_text(spend_of_update(conn, upd.id)[1]) if cost_cap else None,
        "full": bool(upd.full),
    }
