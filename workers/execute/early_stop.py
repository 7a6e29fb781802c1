"""The executor's side of early stop and spend caps: what it knows of a run besides its
prompt (``RunContext``: its bars and tally to judge it by, its update's caps and its
model's price), the judgement after each write-back, and the stop of an update.

When: after a write-back that committed an item answered wrong (MISMATCH) or not at all
(ERROR) — an item answered right never makes a verdict more settled, so a chunk of MATCHes
needs no look — the run's tally is read (one read of a few dozen rows, whatever the number
of items scored: see gate/verdict/early_stop.py) and judged. Settled, and with an item of the update
still to call (a stop must save a call: with every remaining item in flight the run just
ends, and its verdict is the same): the update is stopped (``stop_update``: one
winner, its runs' remaining items STOPPED), and this process's calls of its runs not yet
begun are not made. A write-back that lost its lease asks
whether its run was stopped, so a process learns of another's stop at its next write-back
of that run; until then at most the calls it had claimed go ahead, and their answers are
dropped (their items are STOPPED, their write-back guarded by the lease token)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gate.calls.spend_caps import SpendLimits
from gate.db import read, transaction
from gate.errors import first_line
from gate.kinds import kind_of
from gate.records import ItemResult, Run
from gate.states import RunStatus, Verdict
from gate.store.runs import CANDIDATE, get_run
from gate.store.stops import read_tally, run_stopped, stop_update, update_has_uncalled
from gate.store.updates import get_update
from gate.store.versions import get_version
from gate.verdict.bar_checks import BarCheck, KindChecks, kept
from gate.verdict.bars import Bars, pinned_bars
from gate.verdict.early_stop import Outcomes, settled
from gate.verdict.update_outcome import EARLY_STOP, WITH_UPDATE

log = logging.getLogger("promptgate.execute")
NOT_RIGHT = (Verdict.MISMATCH, Verdict.ERROR)


@dataclass
class RunJudge:
    """What a run's settledness is judged by: its pinned bars, its items and their labels,
    and the live run it is paired with when that run was finished before it began."""

    run_id: int
    bars: Bars
    total: int
    label_totals: dict[str, int]
    live_run_id: int | None = None
    live_right: int | None = None
    by_label: bool = True  # False: a decision field by field (its tally counts no labels)
    kind_checks: KindChecks = kept  # the checks of the run's kind (DecisionKind.checks)

    def settled(self, conn) -> list[BarCheck]:
        rows, _ = read_tally(conn, self.run_id)
        outcomes = Outcomes.from_rows(rows, self.total, self.label_totals, self.live_right)
        return settled(self.bars, outcomes, self.kind_checks)


def live_pair(conn, run: Run) -> tuple[int | None, int | None]:
    """(run id, items it answered right) of the live run a candidate run is paired with for
    early stop: one that was finished when the update was submitted (a live version scored
    alongside is still being scored), whole, not stopped; else (None, None)."""
    baseline = run.pinned.baseline
    if not baseline or not baseline.run_id or baseline.scored_now:
        return None, None
    live = get_run(conn, baseline.run_id)
    metrics = live.metrics or {}
    if live.status != RunStatus.DONE or live.stopped or metrics.get("scored") != metrics.get("total"):
        return None, None
    return live.id, int(metrics.get("matches", 0))


@dataclass
class RunContext:
    """What the executor knows of a run beyond its prompt."""

    caps: SpendLimits = field(default_factory=SpendLimits)
    price: Mapping[str, Any] | None = None
    judge: RunJudge | None = None
    stopped: bool = False

    @classmethod
    def load(cls, conn, run_id: int) -> RunContext:
        run = get_run(conn, run_id)
        upd = get_update(conn, run.update_id)
        limits = upd.limits or {}
        caps = SpendLimits.from_values(limits.get("max_calls_per_update"), limits.get("max_cost_per_update_usd"))
        pinned = run.pinned
        judge = None
        if pinned.early_stop and run.role == CANDIDATE:
            assert run.dataset_version_id is not None  # its items were copied from it (materialize)
            version = get_version(conn, run.dataset_version_id)
            live_id, live_right = live_pair(conn, run)
            kind = kind_of(pinned.decision)
            by_label = kind.counts_by_label(pinned.decision)
            judge = RunJudge(
                run.id,
                pinned_bars(pinned, run.min_accuracy),
                version.row_count,
                dict(version.labels or {}) if by_label else {},
                live_id,
                live_right,
                by_label,
                kind.checks,
            )
        return cls(caps, pinned.price, judge, bool(run.stopped or upd.stopped))


class Stopper:
    """Judges runs after their write-backs and stops their updates (see the module
    docstring). ``runs_of(update_id)``: this process's RunCalls of that update, to mark."""

    def __init__(self, engine, runs_of: Callable[[int], Sequence]):
        self.engine = engine
        self.runs_of = runs_of

    def after_write_back(self, run, run_id: int, results: Sequence[ItemResult], lost: int) -> bool:
        """Judge the run after a write-back (see the module docstring); True when its update
        is known to be stopped (a write-back that lost items learns why)."""
        if run is None or run.stopped:
            return bool(run and run.stopped)
        try:
            if lost and read(self.engine, lambda conn: run_stopped(conn, run_id)):
                self.mark(run.update_id)
                return True
            judge = run.context.judge
            if judge is None or not any(r.verdict in NOT_RIGHT for r in results):
                return False
            missed = read(self.engine, judge.settled)
            if missed and read(self.engine, lambda conn: update_has_uncalled(conn, run.update_id)):
                self.stop(
                    run.update_id,
                    run_id,
                    EARLY_STOP,
                    WITH_UPDATE,
                    {"kind": EARLY_STOP, "run_id": run_id, "bars": [c.title for c in missed]},
                )
        except Exception as exc:  # judging again at the next write-back is enough
            log.warning("run %s: could not judge whether it is settled: %s", run_id, first_line(exc))
        return bool(run.stopped)

    def stop(self, update_id: int, run_id: int, kind: str, sibling_kind: str, info: dict) -> bool:
        """Stop the update (its runs' remaining items STOPPED); True when this call did."""
        stopped = transaction(self.engine, lambda conn: stop_update(conn, update_id, kind, run_id, info, sibling_kind))
        self.mark(update_id)
        if stopped:
            log.info(
                "update %s stopped (%s, by run %s): %s item(s) not called",
                update_id,
                kind,
                run_id,
                sum(stopped.values()),
            )
        return bool(stopped)

    def mark(self, update_id: int) -> None:
        """This process's runs of the update make no further call."""
        for run in self.runs_of(update_id):
            run.stopped = True
