"""The figures of a run beyond its item verdicts, each computed once per run from its
stored items, in the database (``gate.store.fields``, ``gate.store.policy``), never per
chunk: finalize adds a fields decision's per-field figures (``fields_metrics``), reconcile,
once the live version's answers are in, the per-field flips, the slices, the protected
items that broke and what became of the accepted breaks (``policy_metrics``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, cast

from gate.kinds import kind_of
from gate.prompt.structured.compare import label_named
from gate.prompt.structured.reading import NOT_AN_OBJECT
from gate.prompt.structured.rule import CallRule, FieldsRule
from gate.records import FlipSample, Run
from gate.records.metrics import RunFigures
from gate.states import Verdict
from gate.store.fields import field_counts, field_flips, label_confusion, structured_breakdown
from gate.store.item_stats import run_breakdown
from gate.store.policy import flagged_broken, items_by_id, slice_counts
from gate.store.runs import get_run
from gate.store.tool_calls import argument_flips
from gate.store.versions import get_version
from gate.verdict.bars import pinned_bars
from gate.verdict.scoring import INVALID_DECISION
from workers.tool_figures import call_fields_metrics, call_marks

MISSING, OTHER = "(missing)", "(other)"  # a label field's answer: not given, or none of its labels
MAX_SLICES = 200
PROTECTED_SAMPLES = 20


class StoreFigures:
    """The store's counts a decision's kind makes its figures of (``gate.kinds.FigureSource``)."""

    def __init__(self, conn):
        self.conn = conn

    def label_breakdown(self, run_id: int) -> list[tuple[str, str, str | None, int]]:
        return run_breakdown(self.conn, run_id)

    def fields_breakdown(self, run_id: int) -> list[tuple[str, None, str | None, int]]:
        return structured_breakdown(self.conn, run_id, NOT_AN_OBJECT, INVALID_DECISION)

    def check_counts(self, run_id: int, checks: int) -> dict[str, Any]:
        return field_counts(self.conn, run_id, checks)

    def fields_figures(self, run_id: int, rule: FieldsRule) -> dict[str, Any]:
        return fields_metrics(self.conn, run_id, rule)

    def call_figures(self, run_id: int, rule: FieldsRule) -> dict[str, Any]:
        return call_fields_metrics(self.conn, run_id, cast(CallRule, rule))

    def call_marks(self, run_id: int, with_fields: bool) -> dict[str, Any]:
        return call_marks(self.conn, run_id, with_fields)

    def field_flips(self, run_id: int, live_id: int, bits: list[tuple[int, int]]) -> list[Any]:
        return field_flips(self.conn, run_id, live_id, bits)

    def argument_flips(self, run_id: int, live_id: int, bits: list[tuple[int, int]]) -> list[Any]:
        return argument_flips(self.conn, run_id, live_id, bits)


def fields_metrics(conn, run_id: int, rule: FieldsRule) -> dict[str, Any]:
    """Per field: right, wrong and missing over the items scored; per label field its
    confusion matrix (expected label → answered label, ``(missing)`` or ``(other)``)."""
    counts = field_counts(conn, run_id, len(rule.fields))
    scored = counts["scored"]
    fields = [
        {
            "field": f.name,
            "type": f.type,
            "right": scored - counts["wrong"][i],
            "wrong": counts["wrong"][i],
            "missing": counts["missing"][i],
        }
        for i, f in enumerate(rule.fields)
    ]
    confusion = {}
    for f in rule.fields:
        if f.type == "label":
            matrix: dict[str, dict[str, int]] = {}
            for expected, actual, n in label_confusion(
                conn, run_id, f.name, rule.bit(f.name), f.labels, MISSING, OTHER
            ):
                row = matrix.setdefault(label_named(expected, f.labels) or str(expected), {})
                row[actual] = row.get(actual, 0) + n
            confusion[f.name] = matrix
    return {"items": scored, "fields": fields, "confusion": confusion}


def policy_metrics(conn, run: Run, figures: RunFigures) -> dict[str, Any]:
    """What reconcile adds beside the comparison (``figures``: the run's, with it), by key
    in the order written (``RunFigures.extended``)."""
    live_id = _live_run(run, figures)
    bars = pinned_bars(run.pinned, run.min_accuracy)
    out: dict[str, Any] = {}
    flips = _field_flips(conn, run, live_id, figures)
    if flips is not None:
        out["field_flips"] = flips
    if bars.policy.slice_by is not None:
        out["slices"] = _slices(conn, run, live_id, bars.policy.slice_by, bars.slice_items)
    out.update(_protected_and_accepted(conn, run, live_id, bars))
    return out


def _live_run(run: Run, figures: RunFigures) -> int | None:
    """The run whose answers are live's on these items: the baseline, or the run itself when
    the candidate is the live config; None without a comparison."""
    if not figures.flips:
        return None
    baseline = run.pinned.baseline
    live = figures.live
    return run.id if baseline and baseline.same_config else (live.run_id if live else None)


def _field_flips(conn, run: Run, live_id: int | None, figures: RunFigures) -> dict | None:
    """Per field both the candidate and live decide: live's right answers, fixed, broken."""
    kind = kind_of(run.pinned.decision)
    rule = kind.fields_rule(run.pinned.decision)
    if rule is None or live_id is None or not figures.fields:
        return None
    live = run.pinned.decision if live_id == run.id else get_run(conn, live_id).pinned.decision
    live_rule = rule if live_id == run.id else kind_of(live).fields_rule(live)
    return kind.field_flips(StoreFigures(conn), run.id, live_id, rule, live_rule)


def _slices(conn, run: Run, live_id: int | None, column: str, min_items: int) -> dict[str, Any]:
    version_id = run.dataset_version_id
    # a run from before versions: no rows to slice (as the query found joining on a NULL version)
    found = [] if version_id is None else slice_counts(conn, run.id, version_id, column, live_id, MAX_SLICES + 1)
    return {
        "column": column,
        "min_items": min_items,
        "slices": found[:MAX_SLICES],
        "too_many": len(found) > MAX_SLICES,
        "compared": live_id is not None,
    }


def _protected_and_accepted(conn, run: Run, live_id: int | None, bars) -> dict[str, Any]:
    """The protected items (the dataset's flagged rows and the mapping's ids) and which of
    them broke, accepted breaks apart; each accepted break as broke, stale (it did not
    break), absent (no such item) or unchecked (no live version to compare with)."""
    policy = bars.policy
    if run.dataset_version_id is None:  # a run from before versions: nothing to read items by
        return {}
    version = get_version(conn, run.dataset_version_id)
    flagged = int((version.fields or {}).get("protected") or 0)
    accepted = {a.item: a for a in policy.accept_breaks}
    named = {
        r["item_id"]: r
        for r in items_by_id(
            conn, run.id, live_id, run.dataset_version_id, sorted(set(policy.protected) | set(accepted))
        )
    }
    out: dict[str, Any] = {}
    if accepted:
        out["accepted_breaks"] = [
            {
                "item": a.item,
                "reason": a.reason,
                "commit": a.commit,
                "state": _accepted_state(named.get(a.item), live_id),
            }
            for a in accepted.values()
        ]
    listed = [r for i, r in named.items() if i in policy.protected and not r["protected"]]
    items = flagged + len(listed)
    if not items:
        return out
    broken: int = 0
    samples: list[Any] = []
    if live_id is not None:
        broken, samples = flagged_broken(
            conn, run.id, live_id, run.dataset_version_id, sorted(accepted), PROTECTED_SAMPLES
        )
        extra = [r for r in listed if _broke(r) and r["item_id"] not in accepted]
        broken += len(extra)
        samples = sorted(samples + [(r["position"], _flip(r)) for r in extra], key=lambda p: p[0])
    out["protected"] = {
        "items": items,
        "broken": broken,
        "samples": [_sample(s) for _, s in samples[:PROTECTED_SAMPLES]],
    }
    return out


def _sample(flip: FlipSample) -> dict[str, Any]:
    """A protected item that broke, as its figures keep it (its failed checks only when it has some)."""
    out = asdict(flip)
    if out.get("checks_failed") is None:
        out.pop("checks_failed", None)
    return out


def _broke(row: dict) -> bool:
    return row["verdict"] == Verdict.MISMATCH and row["live_verdict"] == Verdict.MATCH


def _accepted_state(row: dict | None, live_id: int | None) -> str:
    if row is None:
        return "absent"
    if live_id is None:
        return "unchecked"
    return "broke" if _broke(row) else "stale"


def _flip(row: dict) -> FlipSample:
    return FlipSample(row["item_id"], row["expected"], row["live_actual"], row["actual"], row["output"])
