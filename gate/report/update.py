"""What the service hands out about an update: its report (per run: the counts, the
accuracy, every bar and how the run stands against it, the comparison with the live
version on the same items, per-label metrics, the calls' latency and tokens, a few failing
and broken items; per field, per slice, protected items and accepted breaks) as frozen dataclasses, and ``to_dict``
for ``status --json`` (its
contract: gate/schemas/status.schema.json).

No database here (``gate.domain`` re-exports these): the CLI renders a service's answer
with them without loading SQLAlchemy."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from decimal import Decimal
from typing import Any, cast

from gate.records import FlipSample, ItemSample, Run, UnstableItem, Update
from gate.records.metrics import RunFigures, RunMetrics
from gate.records.pinned import Pinned
from gate.states import EXIT_CODES, EXIT_NOT_JUDGED, UPDATE_TERMINAL, RunStatus, UpdateStatus
from gate.verdict.bars import DEFAULT_CONFIDENCE, pinned_bars
from gate.verdict.scoring import format_pct
from gate.verdict.stats import label_metrics, mcnemar_exact, paired_difference_interval, significant, wilson_interval
from gate.verdict.update_outcome import UNJUDGED, run_checks

from . import canary, unjudged
from .figures import accepted_view, fields_view, protected_view, slices_view
from .judge_view import compared_accuracy, judge_view, shown_pinned
from .tool_calls import schema_view, tool_calls_view, with_calls


@dataclass(frozen=True)
class RunReport:
    run_id: int
    dataset: str
    bar: Decimal
    status: str
    total: int
    scored: int
    matches: int
    errors: int
    pending: int
    accuracy: float | None  # raw matches / scored, for display; the gate uses exact fractions
    passed: bool | None  # None until the run is DONE
    reason: str | None
    row_count: int
    content_hash: str | None
    source_version: str | None
    source_uri: str
    metrics: dict | None
    failures: list[ItemSample] = field(default_factory=list)
    dataset_version_id: int | None = None
    dataset_version_number: int | None = None  # its number in its dataset: outputs say "v3"
    pinned: dict | None = None  # what the verdict stands on (gate.prompt.request_keys.pin)
    reused: dict[int, int] = field(default_factory=dict)  # update id -> answers reused from it
    checks: list[dict] = field(default_factory=list)  # every bar against the run (gate.verdict.bar_checks.BarCheck)
    comparison: dict | None = None  # live vs candidate on the same items (``comparison``)
    baseline_note: str | None = None  # why there is no comparison
    labels: dict = field(default_factory=dict)  # label -> support, precision, recall, F1
    calls: dict | None = None  # latency p50/p95/max (ms) and tokens of the answers
    broken: list[FlipSample] = field(default_factory=list)  # the first items live got right and this wrong
    cost: dict | None = None  # usd, per_1k_items (decimal text) and the price pinned at submit
    trials: dict | None = None  # calls per item and their rule (gate.prompt.trials), unstable items; None: one call
    unstable: list[UnstableItem] = field(default_factory=list)  # the first items whose trials disagree
    fields_read: list[dict] | None = None  # item fields the templates read, rows having each (None: not pinned)
    fields: dict | None = None  # a fields decision: per field (gate.report.figures.fields_view)
    slices: dict | None = None  # per value of the mapping's slice_by column
    protected: dict | None = None  # the protected items, and those that broke
    accepted_breaks: list[dict] = field(default_factory=list)  # the mapping's accepted breaks, and what became of each
    stopped: int = 0  # items never answered: the run stopped first (early stop, spend cap)
    stop: dict | None = None  # why it stopped: kind, sentence, calls saved; None: it did not
    judge: dict | None = None  # a judged run: its judge, agreement, corrected rate, sentinels (gate.report.judge_view)
    tool_calls: dict | None = None  # a tool_call decision: marked answers, parallel calls (gate.report.tool_calls)
    schema: dict | None = None  # a strict response schema: the answers that broke it

    @property
    def check_rates(self) -> dict | None:
        """A decision with checks: per check, the items passed and the pass rate (gate.kinds.checks)."""
        return check_rates_view(self.metrics or {})

    @property
    def reused_total(self) -> int:
        return sum(self.reused.values())

    @property
    def not_judged(self) -> bool:
        """Bars of the run were not judged, and an admin accepted them so (gate.report.unjudged)."""
        return any(c["state"] == unjudged.STATE for c in self.checks)

    @property
    def figure(self) -> dict[str, Any]:
        """The figure ``min_accuracy`` compares, as every output shows it first (issue 46.3):
        ``of`` (``accuracy``: matches / scored; ``not_lost``: a comparison's items consistently not
        lost, ``compared_accuracy``; ``corrected``: a judged run's pass rate
        corrected for the judge's error rates, ``judge_corrected``), ``shown`` (the
        percentage, "n/a" when there is none yet) and ``as_judged`` (the other figure,
        labelled: "as judged 66.7%"; None when the bar compares matches / scored)."""
        compared = compared_accuracy(self)  # a comparison's: the share consistently not lost
        if compared is not None:
            return {"of": "not_lost", "shown": compared, "as_judged": None}
        judge = Pinned.of(self.pinned).judge
        if not (judge and judge.corrected):
            shown = format_pct(self.matches, self.scored, self.bar) if self.scored else "n/a"
            return {"of": "accuracy", "shown": shown, "as_judged": None}
        check = next((c for c in self.checks if c["bar"] == "min_accuracy"), None)
        as_judged = f"as judged {format_pct(self.matches, self.scored, self.bar)}" if self.scored else None
        return {"of": "corrected", "shown": (check or {}).get("value") or "n/a", "as_judged": as_judged}


@dataclass(frozen=True)
class UpdateReport:
    update: Update
    runs: list[RunReport]
    attempts: dict[str, int]
    spend: dict = field(default_factory=dict)  # calls: the upper bound and caps pinned at submit, made, reused, saved
    rollout: dict | None = None  # an APPLIED update's canary rollout (gate.report.canary.rollout_summary)

    @property
    def status(self) -> str:
        return self.update.status

    @property
    def outcome(self) -> str:
        """The status, or what its canary made of an APPLIED one (gate.report.canary), or
        NOT_JUDGED for one an admin accepted without a judge (gate.report.unjudged)."""
        found = canary.outcome(self.update.status, self.rollout)
        return unjudged.OUTCOME if found == UpdateStatus.APPLIED and unjudged.not_judged(self.update) else found

    @property
    def outcome_sentence(self) -> str | None:
        return canary.sentence(self.update.status, self.rollout) or unjudged.sentence(self.update)

    @property
    def terminal(self) -> bool:
        return self.update.status in UPDATE_TERMINAL

    @property
    def exit_code(self) -> int:
        """`wait`'s and `status`'s: the status's, 1 once its canary was rolled back or ended undecided,
        5 for an update APPLIED not judged (``EXIT_NOT_JUDGED``)."""
        if self.outcome == unjudged.OUTCOME:
            return EXIT_NOT_JUDGED
        return canary.exit_code(self.update.status, self.rollout, EXIT_CODES[UpdateStatus(self.update.status)])

    def to_dict(self) -> dict[str, Any]:
        def plain(value):
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [plain(v) for v in value]
            if isinstance(value, Decimal):
                return float(value)
            if isinstance(value, dt.datetime):
                return value.isoformat() + "Z"
            return value

        u = asdict(self.update)
        return plain(
            {
                "id": u.pop("id"),
                **u,
                "runs": [{"figure": r.figure, **asdict(r), "check_rates": r.check_rates} for r in self.runs],
                "attempts": self.attempts,
                **({"spend": self.spend} if self.spend else {}),
                "outcome": self.outcome,
                "outcome_sentence": self.outcome_sentence,
                "rollout": self.rollout,
            }
        )


def run_report(
    run: Run,
    counts,
    failures: list[ItemSample],
    reused: dict[int, int] | None = None,
    broken: list[FlipSample] | None = None,
    unstable: list[UnstableItem] | None = None,
    accepted: bool = False,  # its update accepted unjudged by an admin (gate.report.unjudged)
) -> RunReport:
    metrics = run.metrics or {}
    failures, broken, protected = _with_wrong_fields(run, failures, broken or [], protected_view(metrics))
    failures = with_calls(run.pinned.decision, failures)
    matches, scored = metrics.get("matches", counts.match), metrics.get("scored", counts.scored)
    checks = unjudged.shown_checks(_checks(run), accepted)
    stop = _stop(metrics, run)
    sections = _sections(run)
    fields = fields_view(metrics) if "fields" in sections else None
    return RunReport(
        run_id=run.id,
        dataset=run.dataset_name,
        bar=run.min_accuracy,
        status=run.status,
        total=metrics.get("total", counts.total),
        scored=scored,
        matches=matches,
        errors=metrics.get("errors", counts.error),
        pending=counts.pending,
        accuracy=(matches / scored) if scored and not _unjudged_accuracy(checks) else None,
        passed=_passed(run.status, checks, stop),
        reason=run.reason,
        row_count=run.row_count,
        content_hash=run.content_hash,
        source_version=run.source_version,
        source_uri=run.source_uri,
        metrics=cast("dict | None", run.metrics),  # on the wire as the JSON it is
        failures=failures,
        dataset_version_id=run.dataset_version_id,
        dataset_version_number=run.dataset_version_number,
        pinned=shown_pinned(run.pinned),
        reused=reused or {},
        checks=checks,
        comparison=comparison(metrics, pinned_bars(run.pinned, run.min_accuracy).confidence),
        baseline_note=metrics.get("baseline_note") if "flips" in metrics else run.pinned.baseline_note,
        labels=label_metrics(metrics.get("confusion") or {}) if "labels" in sections else {},
        calls=metrics.get("calls"),
        broken=broken or [],
        cost=_cost(metrics, run.pinned),
        trials=_trials(metrics, run.pinned),
        unstable=unstable or [],
        fields_read=_fields_read(run.pinned),
        fields=fields,
        slices=slices_view(metrics),
        protected=protected,
        accepted_breaks=accepted_view(metrics),
        stopped=metrics.get("stopped", counts.stopped),
        stop=stop,
        judge=judge_view(run.pinned, metrics) if "judge" in sections else None,
        tool_calls=tool_calls_view(metrics, fields) if "tool_calls" in sections else None,
        schema=schema_view(metrics),
    )


def check_rates_view(metrics: Mapping[str, Any]) -> dict | None:
    """Per check: the items scored, passed, failed and the pass rate (None: no checks)."""
    figures = metrics.get("checks")
    if not figures:
        return None
    items = figures["items"]
    return {
        "items": items,
        "checks": [{**c, "rate": (c["passed"] / items) if items else None} for c in figures["checks"]],
    }


def _unjudged_accuracy(checks: list[dict]) -> bool:
    """``min_accuracy`` could not be judged (its items were not compared: issue 46.1): the run
    shows no accuracy, never "100 %" of nothing."""
    return any(c["bar"] == "min_accuracy" and c.get("reason") == UNJUDGED for c in checks)


def _passed(status: str, checks: list[dict], stop: dict | None) -> bool | None:
    """A finished run passed when no check failed; one settled early failed; None: not judged."""
    if status != RunStatus.DONE:
        return None
    if stop is not None:
        return False if stop["kind"] == "early_stop" else None
    if any(c["state"] == unjudged.STATE for c in checks):  # accepted unjudged: neither a pass nor a fail
        return None
    return all(c["state"] != "fail" for c in checks)


def _checks(run: Run) -> list[dict[str, Any]]:
    """A finished run's checks, as its kind holds its bars (``DecisionKind.checks``)."""
    from gate.kinds import checks_of

    return [c.to_dict() for c in run_checks(run, checks_of(run))] if run.status == RunStatus.DONE else []


def _sections(run: Run) -> frozenset[str]:
    """The report's sections of the run's kind (``DecisionKind.report_sections``): a judged
    run's labels are its judge's, not shown; a fields decision's fields are."""
    from gate.kinds import kind_of

    return kind_of(run.pinned.decision).report_sections


def _with_wrong_fields(run: Run, failures: list[ItemSample], broken: list[FlipSample], protected: dict | None):
    """A fields decision's sample items, each with the fields it got wrong."""
    from gate.kinds import kind_of  # the prompt's parts (Jinja2, YAML): only for a report that shows items

    wrong_fields = kind_of(run.pinned.decision).wrong_fields(run.pinned.decision)
    if wrong_fields is None:
        return failures, broken, protected
    failures = [
        replace(f, wrong_fields=wrong_fields(f.actual_decision, f.expected_decision)) if f.verdict == "MISMATCH" else f
        for f in failures
    ]
    broken = [replace(b, wrong_fields=wrong_fields(b.candidate_decision, b.expected_decision)) for b in broken]
    if protected:
        protected = {
            **protected,
            "samples": [
                {**s, "wrong_fields": wrong_fields(s["candidate_decision"], s["expected_decision"])}
                for s in protected["samples"]
            ],
        }
    return failures, broken, protected


def _stop(metrics: RunMetrics, run: Run) -> dict | None:
    """A stopped run's stop as the report says it: why (early_stop: its verdict was
    settled; with_update: another run of its update settled it; spend_cap), in a sentence
    once reconcile confirmed it, and the calls it saved; None for a run not stopped."""
    stop = RunFigures.of(metrics).stop
    if not stop and not run.stopped:
        return None
    kind = (stop.kind if stop else None) or run.stopped
    sentence = SAID_SAVED.sub("", stop.sentence) if stop and stop.sentence else None  # said once: spend_line
    return {"kind": kind, "sentence": sentence, "calls_saved": metrics.get("calls_saved")}


# A stop's sentence stored before issue 49 ended with its calls saved: the calls line says them.
SAID_SAVED = re.compile(r" — [\d,]+ calls? saved$")


def _fields_read(pinned: Pinned) -> list[dict] | None:
    """The item fields the candidate's templates read, as pinned at submit
    (``gate.domain.admission``): per field, how many of the version's rows have it
    (None: not counted) and whether the gate config declares it optional."""
    fields = pinned.fields
    if fields is None:
        return None
    optional = set(fields.get("optional") or ())
    return [
        {"field": name, "rows": rows, "of": fields.get("rows"), "optional": name in optional}
        for name, rows in sorted((fields.get("read") or {}).items())
    ]


def _trials(metrics: RunMetrics, pinned: Pinned) -> dict | None:
    """A run with trials: n, rule, k, how many must match, and how many items are
    unstable (None until the run is finalized)."""
    trials = pinned.trials
    if not trials:
        return None
    return {
        "n": trials.n,
        "rule": trials.rule,
        "k": trials.k,
        "needed": trials.needed,
        "unstable": metrics.get("unstable"),
    }


def _cost(metrics: RunMetrics, pinned: Pinned) -> dict | None:
    """The cost as shown: exact dollars, per 1,000 items to 9 decimals (the cost bar
    compares the exact figures), and the price it was computed at."""
    answered = metrics.get("total", 0) - metrics.get("stopped", 0)  # a stopped run's rows not called cost nothing
    usd = metrics.get("cost_usd")
    if usd is None or answered <= 0:
        return None
    per_1k = Decimal(usd) * 1000 / answered
    return {"usd": usd, "per_1k_items": f"{per_1k:.9f}", "price": pinned.price}


def comparison(metrics: RunMetrics, confidence: Decimal = DEFAULT_CONFIDENCE) -> dict | None:
    """Live against candidate on the same items, from finalize's flips: each accuracy on the
    items both scored (``paired``: a stopped candidate scored fewer than live did, and
    "on the same items" compares only those) with its Wilson 95 % interval, the change in
    points, the paired difference's interval at ``confidence`` (Newcombe's method 10: the
    resolution the dataset gives), fixed and broken counts, and McNemar's exact p-value on
    them (None, no test statistic, when no item was scored by both: nothing to compare)."""
    flips, live = metrics.get("flips"), metrics.get("live")
    if not flips or not live:
        return None
    paired = flips["paired"]
    live_right, mine_right = flips["both_right"] + flips["broken"], flips["both_right"] + flips["fixed"]
    live_accuracy = live_right / paired if paired else None
    accuracy = mine_right / paired if paired else None
    p_value = mcnemar_exact(flips["fixed"], flips["broken"]) if paired else None
    return {
        "live_update_id": live.get("update_id"),
        "live_version": live.get("live_version"),
        "live_run_id": live.get("run_id"),
        "live_scored_now": bool(live.get("scored_now")),
        "live_accuracy": live_accuracy,
        "live_interval": _interval(live_right, paired),
        "live_scored": live.get("scored", 0),  # live's own items, of which ``paired`` are compared
        "scored": metrics.get("scored", 0),
        "accuracy": accuracy,
        "interval": _interval(mine_right, paired),
        "delta_points": None
        if live_accuracy is None or accuracy is None
        else round(100 * (accuracy - live_accuracy), 9),
        "fixed": flips["fixed"],
        "broken": flips["broken"],
        "both_right": flips["both_right"],
        "both_wrong": flips["both_wrong"],
        "paired": paired,
        "p_value": p_value,
        "significant": significant(p_value) if p_value is not None else False,
        "difference_points": round(100 * (flips["fixed"] - flips["broken"]) / paired, 9) if paired else None,
        "difference_interval": _difference(flips, confidence),
        "confidence": float(confidence),
    }


def _difference(flips: dict, confidence: Decimal) -> list[float] | None:
    found = paired_difference_interval(
        flips["both_right"], flips["fixed"], flips["broken"], flips["both_wrong"], float(confidence)
    )
    return None if found is None else [found[1], found[2]]


def _interval(successes: int, n: int) -> list[float] | None:
    found = wilson_interval(successes, n)
    return list(found) if found else None
