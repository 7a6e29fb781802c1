"""How an update whose runs are all terminal ends (``update_end``; an item's verdict is
``states.Verdict``): REJECTED when a run stopped early because no outcome of its remaining
items could clear its bars (gate/verdict/early_stop.py); FAILED when its spend cap stopped it, when a
run could not be scored, when a bar could not be judged (a check's reason ``unjudged``:
a comparison with no live version to compare with), or when the live version's answers a bar compared with live (or
the protection of protected items) needs could not be had; REJECTED when any bar of any
run fails — "missed" (the figure is on the wrong side; a protected item that broke is
named first), or for ``max_drop`` "inconclusive" (the interval straddles the limit: the
dataset cannot tell) — a bar n/a does not block — or when the update applies a judge (runs
pinned ``as_judge``) whose agreement over its runs is below its floors (the judge cannot
tell: ``gate.verdict.judge_floors``); else PASSED (check) or APPLIED (apply).
A baseline run that failed otherwise only shows in the report.

The reason is composed from the runs' reasons, which name no item (``gate.verdict.reasons``), and
names none itself: how many protected items broke, not which; a slice that missed its bar
by its column, not its value. Any reader of the update reads it, of a holdout too.

A run is held to its bars as its decision's kind holds them (``gate.bar_checks.KindChecks``):
this floor is below the kinds', so its callers pass them in (``run_checks(run, kind_checks)``,
``update_end(mode, runs, checks_of)``, ``checks_of``: a run's kind's checks,
``gate.kinds.registry.checks_of``)."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, cast

from gate.records.metrics import RunFigures, RunMetrics
from gate.states import Mode, RunStatus, UpdateStatus

from .bar_checks import BarCheck, KindChecks, check, kept
from .bars import pinned_bars
from .judge_bars import drifted_runs
from .judge_floors import JudgeFloors, merged, own_figures
from .reasons import plain_bar

UNJUDGED = "unjudged"  # a check's reason: its bar could not be judged (gate.kinds.judged.UNJUDGED)
ACCEPTED_UNJUDGED = "accept_unjudged"  # an update's source: an admin accepted it unjudged (gate.domain.unjudged)
NOT_JUDGED = "not judged"  # how an update APPLIED so reads, first in its reason and everywhere
EARLY_STOP, SPEND_CAP, WITH_UPDATE = "early_stop", "spend_cap", "with_update"  # a run's stop, by why
JUDGE_DRIFT = "judge_drift"  # a run's judge drifted on its sentinels (gate.verdict.judge_stats.drift)
ChecksOf = Callable[[Any], KindChecks]  # a run -> its kind's checks (gate.kinds.registry.checks_of)


def _kept_of(run: Any) -> KindChecks:
    return kept


def run_checks(run, kind_checks: KindChecks = kept) -> list[BarCheck]:
    """A finished run against the bars pinned with it, as its kind holds them
    (``kind_checks``). A run that stopped early is held against its best completion (every
    remaining item right: what settled it), with the figures that completion would have; a
    run stopped with its update is not judged."""
    metrics = cast(RunMetrics, run.metrics or {})
    stop = metrics.get("stop")
    if stop is None:
        return check(pinned_bars(run.pinned, run.min_accuracy), metrics, kind_checks)
    if stop.get("kind") != EARLY_STOP or not stop.get("best"):
        return []
    early = "stopped early: even if every remaining item matched"
    return [
        c if c.state != "fail" else BarCheck(c.name, c.label, c.limit, c.value, c.state, early, c.reason)
        for c in check(
            pinned_bars(run.pinned, run.min_accuracy), cast(RunMetrics, {**metrics, **stop["best"]}), kind_checks
        )
    ]


def stop_kind(run) -> str | None:
    stop = RunFigures.of(run.metrics).stop
    return stop.kind if stop else None


def update_end(
    mode: str, runs: Sequence, checks_of: ChecksOf = _kept_of, accepted: bool = False
) -> tuple[UpdateStatus, str]:
    """``runs`` have .status, .dataset_name, .metrics, .min_accuracy, .pinned and .reason;
    ``checks_of``: a run's kind's checks. ``accepted``: an admin accepted the update unjudged
    (gate.domain.unjudged): the bars that could not be judged do not block, every other bar
    does, and the update ends APPLIED saying first that it was not judged and which bars."""
    if not runs:
        return UpdateStatus.FAILED, "no runs"
    drifted = drifted_runs(runs)  # never a pass, nor a rejection, on a judge that no longer agrees
    if drifted:
        return UpdateStatus.FAILED, "; ".join(f"{r.dataset_name}: {r.reason}" for r in drifted)
    stopped = _stopped_end(runs)
    if stopped is not None:
        return stopped
    broken = [r for r in runs if r.status != RunStatus.DONE]
    if broken:
        why = "; ".join(f"{r.dataset_name}: {r.reason or r.status}" for r in broken)
        return UpdateStatus.FAILED, f"could not be scored: {why}"
    unanswered = [(r, name) for r in runs if RunFigures.of(r.metrics).baseline_error for name in _live_bars(r)]
    if unanswered:
        why = "; ".join(f"{r.dataset_name}: {r.metrics['baseline_error']} ({name} needs it)" for r, name in unanswered)
        return UpdateStatus.FAILED, f"could not be scored: {why}"
    checks = [(r, run_checks(r, checks_of(r))) for r in runs]
    said = _unjudged(checks)
    if said and not accepted:  # a bar that could not be judged (a comparison that did not happen): never a pass
        return UpdateStatus.FAILED, "could not be scored: " + said
    if said:  # accepted by an admin: those bars never count, as a pass or otherwise
        checks = [(r, [c for c in cs if c.reason != UNJUDGED]) for r, cs in checks]
    # a bar still pending (not compared yet) never passes: reconcile compares first, so
    # this only guards against a verdict taken too early
    # a protected item that broke is named first (sorted is stable: the rest keep their order)
    failing = sorted(
        ((r.dataset_name, c) for r, cs in checks for c in cs if c.state in ("fail", "pending")),
        key=lambda f: f[1].name != "protected",
    )
    missed = _said_once([(_missed(ds, c), c.slice_of is not None) for ds, c in failing if c.reason != "inconclusive"])
    missed += _judge_below_floors(runs)
    inconclusive = _said_once(
        [
            (f"{ds} {c.title} {c.value} ({(c.note or '').removeprefix('inconclusive: ')})", False)
            for ds, c in failing
            if c.reason == "inconclusive"
        ]
    )
    if missed or inconclusive:
        return UpdateStatus.REJECTED, "; ".join(
            ([f"missed: {'; '.join(missed)}"] if missed else [])
            + ([f"inconclusive: {'; '.join(inconclusive)}"] if inconclusive else [])
        )
    return _cleared(mode, checks, said)


def _cleared(mode: str, checks: list[tuple[Any, list[BarCheck]]], unjudged: str) -> tuple[UpdateStatus, str]:
    """PASSED or APPLIED: every bar cleared, or (``unjudged``: the bars an admin accepted
    unjudged) every other bar, the update not judged, said first."""
    cleared = "; ".join(
        f"{r.dataset_name} {c.value or 'n/a'} ≥ {c.limit}" + (f" {c.note}" if c.note else "")
        for r, cs in checks
        for c in cs
        if c.name == "min_accuracy"
    )
    skipped = sorted({plain_bar(c.name, c.label) for _, cs in checks for c in cs if c.state == "n/a"})
    tail = f"; nothing to measure for: {', '.join(skipped)}" if skipped else ""  # (not "not applied" under APPLIED)
    status = UpdateStatus.APPLIED if mode == Mode.APPLY else UpdateStatus.PASSED
    if unjudged:
        rest = f"every other bar cleared{f' ({cleared})' if cleared else ''}"
        return status, f"{NOT_JUDGED}: accepted by an admin without a judge ({unjudged}); {rest}{tail}"
    return status, f"every bar cleared ({cleared}){tail}"


def _unjudged(checks: list[tuple[Any, list[BarCheck]]]) -> str:
    """The bars that could not be judged (a comparison that did not happen), by dataset and
    why ("d min_accuracy, max_loss_rate: no live version to compare with: …"); "" for none."""
    unjudged: dict[tuple[str, str], list[str]] = {}  # (dataset, why) -> the bars
    for r, cs in checks:
        for c in cs:
            if c.reason == UNJUDGED:
                unjudged.setdefault((r.dataset_name, c.note or ""), []).append(c.title)
    return "; ".join(f"{ds} {', '.join(titles)}: {why}" for (ds, why), titles in unjudged.items())


def _judge_below_floors(runs: Sequence) -> list[str]:
    """A judge's own gate (runs pinned ``as_judge``): its agreement with the humans over
    all its runs, against the strictest of their mappings' floors; the figure that failed,
    with its value, or nothing (``gate.verdict.judge_floors``)."""
    own = [r for r in runs if r.pinned.as_judge is not None]
    if not own:
        return []
    floors = functools.reduce(JudgeFloors.stricter, (pinned_bars(r.pinned, r.min_accuracy).judge.floors for r in own))
    pairwise = any(bool(r.pinned.as_judge.get("pairwise")) for r in own)
    figures = own_figures(merged(RunFigures.of(r.metrics).confusion or {} for r in own), pairwise)
    miss = floors.miss(figures)
    return [f"the judge cannot tell: {miss}"] if miss else []


def _stopped_end(runs: Sequence) -> tuple[UpdateStatus, str] | None:
    """The end of an update some of whose runs stopped before every item was called: a run
    settled early (confirmed on its final figures by reconcile) rejects it, the spend cap
    fails it. A run that stopped early but whose final figures do not settle it (never
    expected: its tally would have been wrong) fails it rather than reject on a guess."""
    settled = [r for r in runs if stop_kind(r) == EARLY_STOP]
    confirmed = [r for r in settled if r.metrics["stop"].get("missed")]
    if confirmed:
        return UpdateStatus.REJECTED, "stopped early: " + "; ".join(
            f"{r.dataset_name}: {r.metrics['stop']['sentence']}" for r in confirmed
        )
    if settled:
        return UpdateStatus.FAILED, (
            "stopped early, but the items answered do not settle the verdict: "
            + ", ".join(r.dataset_name for r in settled)
            + "; resubmit with --full"
        )
    capped = [r for r in runs if stop_kind(r) == SPEND_CAP]
    if capped:
        return UpdateStatus.FAILED, f"spend cap reached: {capped[0].metrics['stop'].get('sentence') or ''}".rstrip()
    if any(stop_kind(r) for r in runs):  # stopped with a run that ended otherwise: never a pass
        return UpdateStatus.FAILED, "stopped before every item was called: " + ", ".join(
            r.dataset_name for r in runs if stop_kind(r)
        )
    return None


def _live_bars(run) -> list[str]:
    """What of a run needs the live version's answers (a missing answer fails them): its
    max_broken and max_drop bars, and the protection of its protected items."""
    bars = pinned_bars(run.pinned, run.min_accuracy)
    names = [
        name for name, limit in (("max_broken", bars.max_broken), ("max_drop", bars.max_drop)) if limit is not None
    ]
    protected = RunFigures.of(run.metrics).protected
    return names + (["protection"] if protected and protected.get("items") else [])


def _said_once(clauses: list[tuple[str, bool]]) -> list[str]:
    """Clauses (text, whether it is a slice's) that read the same said once, in their first
    place, with how many they stand for: twenty slices of a free-text column that miss their
    bar alike are one clause, not twenty."""
    counts = Counter(text for text, _ in clauses)
    return [
        text if counts[text] == 1 else f"{text} ({counts[text]} {'slices' if is_slice else 'times'})"
        for text, is_slice in dict.fromkeys(clauses)
    ]


def _missed(dataset: str, c: BarCheck) -> str:
    if c.value is None:  # a bar that applies and could not be computed
        return f"{dataset} {c.title}: {c.note}"
    if c.name == "protected":  # which ones: the report's protected items, for who may read them
        items = "item" if c.value == "1" else "items"
        return f"{dataset}: {c.value} protected {items} broke"
    if c.slice_of is not None:  # a slice by its column, not its value (a holdout's values are its rows')
        return f"{dataset} min_slice_accuracy[{c.slice_of}]: a slice at {c.value} < bar {c.limit}"
    if c.name == "min_accuracy":
        return f"{dataset} {c.value} < bar {c.limit}"
    if c.name == "max_drop":
        return f"{dataset} max_drop {c.value} ({c.note})"
    relation = ">" if c.name.startswith("max_") else "<"
    return f"{dataset} {c.title} {c.value} {relation} bar {c.limit}"
