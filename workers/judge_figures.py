"""A judged run's figures beyond its verdicts (gate/prompt/judge.py), computed once per run:
finalize adds the pass rate as judged with its interval, the rate corrected for the judge's
error rates with its interval (``gate.verdict.judge_stats``), a comparison's wins, losses,
ties and position-inconsistent items, the sentinels' test, and the calls and cost by role;
and ends a run whose judge drifted on its sentinels ERROR, saying so. Reconcile gives a
comparison's items the shape of the comparison with live (wins fixed, losses broken:
``gate.kinds.live.JudgedPairs``), so its ``max_drop`` and ``max_broken`` bars read them as
they read any run's flips."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from gate.kinds import kind_of
from gate.records import Run
from gate.records.metrics import JudgeFigures, RunFigures, SentinelFigures
from gate.records.pinned import Pinned, PinnedJudge
from gate.states import RunStatus
from gate.store.judges import judged_calls
from gate.store.sentinels import sentinel_calls, sentinel_outcomes
from gate.verdict.bars import pinned_bars
from gate.verdict.judge_stats import drift
from gate.verdict.stats import wilson_interval, z_for
from gate.verdict.update_outcome import JUDGE_DRIFT


def calls_per_item(pinned: Pinned) -> int:
    """The most calls one item of a run makes: its trials; judged, its judge's calls too
    (both orders and live's answer for a comparison; sentinels come on top)."""
    calls = pinned.calls_per_item
    judge = pinned.judge
    if judge:
        calls += kind_of(pinned.decision).judge_calls(judge.trials) + (1 if judge.live else 0)
    return calls


def judged_metrics(conn, run: Run, figures: RunFigures) -> dict[str, JudgeFigures]:
    """finalize: ``{"judge": ...}`` for a judged run; nothing for another."""
    pinned = run.pinned.judge
    if not pinned:
        return {}
    confidence = float(pinned_bars(run.pinned, run.min_accuracy).confidence)
    passed, scored = figures.matches or 0, figures.scored or 0
    interval = wilson_interval(passed, scored, z_for(confidence))
    judge = JudgeFigures.made(
        name=pinned.name,
        version=pinned.version,
        passed=passed,
        scored=scored,
        interval=tuple(interval) if interval else None,
        corrected=None,
        pairwise=None,
    )
    judge = judge.extended(**kind_of(run.pinned.decision).judged_figures(pinned, passed, scored, confidence, figures))
    judge = judge.extended(sentinels=sentinel_figures(conn, run, pinned), calls=role_calls(conn, run, figures, pinned))
    return {"judge": judge}


def sentinel_figures(conn, run: Run, pinned: PinnedJudge) -> SentinelFigures | None:
    """The sentinels' agreement and the drift test against the pinned agreement (a run its
    judge's drift stopped drifted, whatever the count says)."""
    outcomes, planned = sentinel_outcomes(conn, run.id)
    if not planned:
        return None
    figures = pinned.agreement or {}
    found = drift(outcomes, planned, figures["agreed"], figures["n"])
    if run.stopped == JUDGE_DRIFT:
        found["drifted"] = True
    return SentinelFigures.made(**{**found, "pinned_accuracy": figures["accuracy"], "pinned_n": figures["n"]})


def role_calls(conn, run: Run, figures: RunFigures, pinned: PinnedJudge) -> dict[str, Any]:
    """Calls and cost by role: the candidate (the run's own figures), the judge, the judge
    on sentinels, and live (a comparison's answers), each at its pinned price."""
    roles: dict[str, dict[str, Any]] = judged_calls(conn, run.id)
    calls, tokens_in, tokens_out, unmetered = sentinel_calls(conn, run.id)
    roles["sentinel"] = {"calls": calls, "prompt_tokens": tokens_in, "completion_tokens": tokens_out}
    roles["sentinel"]["unmetered"] = unmetered
    own = figures.calls.to_json() if figures.calls else {}  # as stored: a key absent reads 0
    roles["candidate"] = {
        "calls": figures.calls_made or 0,
        "prompt_tokens": own.get("prompt_tokens", 0),
        "completion_tokens": own.get("completion_tokens", 0),
        "cost_usd": figures.cost_usd,
    }
    prices = {"judge": pinned.price, "sentinel": pinned.price, "live": pinned.live.price if pinned.live else None}
    for role, price in prices.items():
        roles[role]["cost_usd"] = _cost(roles[role], price)
    made = sum(roles[r]["calls"] for r in ("judge", "sentinel", "live"))
    roles["candidate"]["calls"] = max(0, roles["candidate"]["calls"] - made)  # the tally counts every call
    return roles


def _cost(figures: dict, price: Mapping[str, Any] | None) -> str | None:
    if not figures.get("calls") and not figures.get("prompt_tokens"):
        return "0"
    if not price or figures.get("unmetered"):
        return None
    cost = (
        figures["prompt_tokens"] * Decimal(price["input_per_million"])
        + figures["completion_tokens"] * Decimal(price["output_per_million"])
    ) / 1_000_000
    return f"{cost:f}"


def judged_end(run: Run, figures: RunFigures, status: RunStatus, reason: str | None) -> tuple[RunStatus, str | None]:
    """A run whose judge drifted on its sentinels ends ERROR with the figures, never DONE."""
    judge = figures.judge
    sentinels = judge.sentinels if judge else None
    if not sentinels or not sentinels.drifted:
        return status, reason
    pinned = f"{Decimal(str(round(100 * (sentinels.pinned_accuracy or 0), 1))).normalize():f}"
    return (
        RunStatus.ERROR,
        f"judge drifted: agreed on {sentinels.agreed} of {sentinels.judged} sentinels, pinned {pinned} %",
    )
