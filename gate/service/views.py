"""What the status page shows, as plain values for its templates (``gate/service/templates``):
the same report the pull-request comment is made of (``Gate.status`` → ``UpdateReport``),
plus the progress of a run still open and the geometry of the accuracy chart (inline SVG:
no script, no external file).

Nothing here escapes: the templates' environment autoescapes every value it prints, and
no value built here is marked safe. Only numbers we computed become SVG attributes."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, cast

from gate.datasets.sources import shown_source
from gate.errors import UsageError
from gate.records import DatasetMapping, FleetCounts, Update, WorkerRow
from gate.records.metrics import CallFigures
from gate.records.pinned import Pinned
from gate.report import canary, item_rows, sections, unjudged
from gate.report.figures import accuracy_state, headline_miss, update_outcome
from gate.report.text import difference, saved_by, spend_line
from gate.report.update import RunReport, UpdateReport
from gate.states import UPDATE_OPEN, RunStatus
from gate.verdict.bars import Bars
from gate.verdict.reasons import detail_text
from gate.verdict.scoring import format_bar
from gate.verdict.stats import wilson_interval

CHART_LEFT, CHART_WIDTH, CHART_ROW, CHART_TOP = 170, 500, 46, 26
HEAT_STEPS = 4


def utc_now() -> dt.datetime:
    """Naive UTC, as the database hands out its timestamps."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def dataset_source(ds) -> str:
    """A dataset's source as any reader of the page may see it (``sources.shown_source``: no
    password, no query-string token, a file by its name); for rows uploaded from a
    repository, also the commit they were read at."""
    commit = (ds.options or {}).get("upload_commit")
    return shown_source(ds.source_uri) + (f" @ {str(commit)[:12]}" if commit else "")


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def update_row(u: Update, rollout_state: str | None = None) -> dict[str, Any]:
    """One line of the updates list; ``rollout_state``: its apply's rollout's (its badge beside
    the status: an APPLIED update rolled back by its canary is no ✅, gate.report.canary)."""
    source = u.source or {}
    took = (u.finished_at - u.started_at).total_seconds() if u.finished_at and u.started_at else None
    pr = source.get("pr")
    return {
        "u": u,
        "open": u.status in UPDATE_OPEN,
        "sha": source.get("sha"),
        "pr": pr if isinstance(pr, int) and not isinstance(pr, bool) else None,
        "repo": source.get("repo"),
        "path": source.get("path"),
        "who": source.get("submitted_by"),
        "took": took,
        "outcome": update_outcome(u, rollout_state),
        "after": canary.heading(u.status, {"status": rollout_state} if rollout_state else None),  # "then rolled back"
    }


def update_view(report: UpdateReport, samples: int | None = None, page: int = 1) -> dict[str, Any]:
    """``samples``: the items a page of each run's tables lists; ``page``: which page (the
    report holds the first ``samples * page`` of each run's broken and failing items)."""
    u = report.update
    config = u.candidate_config or {}
    attempts = {k: v for k, v in (report.attempts or {}).items() if isinstance(v, (int, float))}
    runs = [run_view(r, samples, page) for r in report.runs]
    shown = sections.update_sections(report.runs)  # the kinds' (gate.kinds.sections), as the comment's
    return {
        **update_row(u),
        "model": config.get("model"),
        "runs": runs,
        "sections": sections.keyed(shown),
        # the sections over the update's datasets after the bars (the comparison and the bars have their places)
        "more_sections": [s for s in shown if s.scope == "update" and s.key.value not in ("compared", "checks")],
        "terminal": report.terminal,
        "chart": chart_view(report.runs),
        "compared": [r for r in runs if r["compared"] or r["baseline_note"]],
        "attempts": attempts,
        "other_attempts": sorted(
            (k.replace("_", " "), v)
            for k, v in attempts.items()
            if k not in ("retried_items", "extra_attempts", "max_attempt") and v
        ),
        "config_json": pretty_json(config),
        "spend": spend_line(report.spend, report.terminal, by=saved_by(report.runs)) if report.spend else None,
        "outcome": report.outcome,  # the badge: an APPLIED update's canary's state (gate.report.canary)
        "after": canary.heading(u.status, report.rollout),  # "then rolled back": said beside its offline reason
        "in_production": report.outcome_sentence if report.rollout else None,
        "not_judged": unjudged.sentence(u),
        "missed": headline_miss(report.runs) if report.terminal else None,  # the failing bar, in plain words
        "judges": sorted({(str(r.judge["name"]), r.judge.get("version")) for r in report.runs if r.judge}),
    }


def run_view(run: RunReport, samples: int | None = None, page: int = 1) -> dict[str, Any]:
    metrics = run.metrics or {}
    done = run.status == RunStatus.DONE
    expected = max(run.total or 0, run.row_count or 0, int(Pinned.of(run.pinned).rows or 0))
    handled = (run.scored or 0) + (run.errors or 0)
    failing_total = sections.failing_total(run)
    shown_sections = sections.keyed(sections.run_sections(run))
    actual_labels, confusion = confusion_view(metrics.get("confusion") or {} if "labels" in shown_sections else {})
    others = sections.other_failures(run)
    other_total = sections.other_failing_total(run)
    broken_total = (run.comparison or {}).get("broken") or len(run.broken)
    pages = items_pages(samples, page, max(broken_total, other_total))
    shown = slice(pages["first"], pages["first"] + samples) if samples else slice(None)
    result = _result(run)
    return {
        "sections": shown_sections,
        "mode": item_rows.table_mode(run),  # how its items are drawn side by side (sections/items.html.j2)
        "broken_rows": [item_rows.broken_row(b) for b in run.broken[shown]],
        "failing_rows": [item_rows.failing_row(f) for f in others[shown]],
        "reasons": any(row["reason"] for row in item_rows.rows_of(run.broken[shown], others[shown])),
        **item_rows.expected_columns(others[shown], run.unstable),  # none for a dataset without labels
        "other_total": other_total,
        "pages": pages,
        "run": run,
        "accuracy_result": accuracy_state(run, result),  # the summary row's: its accuracy bar's own
        "done": done,
        "open": run.status in (RunStatus.PENDING, RunStatus.RUNNING),
        "result": result,
        "stop": run.stop,  # stopped before every item was called: why, in a sentence
        "difference": difference(run.comparison) if run.comparison else None,
        "expected": expected,
        "handled": handled,
        "progress": (handled / expected) if expected else None,
        "checks": run.checks or [_pending_accuracy(run)],
        "compared": run.comparison,
        "baseline_note": run.baseline_note if done else None,
        "actual_labels": actual_labels,
        "confusion": confusion,
        "labels": sorted(run.labels.items()) if "labels" in shown_sections else [],
        "calls": run.calls if done and CallFigures.of(run.calls or {}).timed else None,
        "failures": run.failures,
        "failing_total": failing_total,
        "broken": run.broken,
        "trials": run.trials,
        "unstable": run.unstable,
        "invalid": metrics.get("invalid", 0),
        "detail": detail_text(metrics),
        "reused": sorted(run.reused.items()),
    }


MOST_ITEMS = 1000  # a run's items its pages reach (?page=): the report reads the first samples * page of them


def items_pages(samples: int | None, page: int, total: int) -> dict[str, Any]:
    """Which page of a run's broken and failing items the page lists: ``first`` (index),
    ``page``, ``previous`` and ``next`` (None: none), ``of`` (pages in all, reaching at most
    ``MOST_ITEMS`` items)."""
    if not samples:
        return {"first": 0, "page": 1, "previous": None, "next": None, "of": 1}
    of = min(max(1, MOST_ITEMS // samples), max(1, -(-total // samples)))
    page = min(max(1, page), of)
    return {
        "first": (page - 1) * samples,
        "page": page,
        "previous": page - 1 if page > 1 else None,
        "next": page + 1 if page < of else None,
        "of": of,
    }


def _result(run: RunReport) -> str:
    if run.not_judged:
        return unjudged.STATE
    if run.passed is not None:
        return "pass" if run.passed else "fail"
    return "stopped" if run.stop else run.status.lower()


def _pending_accuracy(run: RunReport) -> dict[str, Any]:
    """The accuracy bar of a run not finished yet (its other bars are judged at the end)."""
    return {
        "bar": "min_accuracy",
        "label": None,
        "limit": format_bar(run.bar),
        "value": None,
        "state": "pending" if run.status in (RunStatus.PENDING, RunStatus.RUNNING) else "n/a",
        "note": "judged when the run has finished",
    }


def confusion_view(confusion: dict) -> tuple[list[str], list[dict]]:
    """(answered labels, one row per expected label with each cell's count and shade);
    a right answer is shaded green, a wrong one red, darker for more of the row."""
    actual = sorted({a for row in confusion.values() for a in row})
    rows = []
    for expected in sorted(e for e in confusion if e):  # rows without a label (a judged prompt's): no row
        counts = [confusion[expected].get(a, 0) for a in actual]
        most = max(counts) if counts else 0
        cells = [
            {"n": n, "shade": f"{'hit' if a == expected else 'miss'}{_step(n, most)}"} for a, n in zip(actual, counts)
        ]
        rows.append({"expected": expected, "cells": cells, "total": sum(counts)})
    return actual, rows


def _step(n: int, most: int) -> int:
    return 0 if not n or not most else max(1, round(HEAT_STEPS * n / most))


# --- the chart: accuracy per dataset against its bar ---------------------------------------


def _x(fraction: float | Decimal | None) -> float:
    return round(CHART_LEFT + CHART_WIDTH * max(0.0, min(1.0, float(fraction or 0))), 1)


def _bar(fraction: float | None, interval: list | None, y: float, kind: str) -> dict | None:
    if fraction is None:
        return None
    lo, hi = interval if interval else (None, None)
    return {
        "kind": kind,
        "y": y,
        "x": CHART_LEFT,
        "w": round(_x(fraction) - CHART_LEFT, 1),
        "pct": f"{100 * float(fraction):.1f}%",
        "text_x": max(_x(fraction), _x(hi) if hi is not None else 0) + 6,
        "lo": None if lo is None else _x(lo),
        "hi": None if hi is None else _x(hi),
        "mid": y + 6,
    }


def chart_view(runs: Iterable[RunReport]) -> dict | None:
    """Per dataset: the live version's accuracy (when compared), the candidate's (so far,
    while open), each with its Wilson interval as a whisker, and the bar as a red tick."""
    runs = list(runs)
    if not any(r.accuracy is not None for r in runs):
        return None
    rows = []
    for i, r in enumerate(runs):
        y = CHART_TOP + i * CHART_ROW
        c = r.comparison or {}
        live = _bar(c.get("live_accuracy"), c.get("live_interval"), y + 4, "live") if c else None
        own = wilson_interval(r.matches, r.scored) if r.accuracy is not None else None  # all it scored
        mine = _bar(r.accuracy, list(own) if own else None, y + (20 if live else 12), "candidate")
        rows.append(
            {
                "name": r.dataset,
                "y": y,
                "mid": y + 22,
                "live": live,
                "candidate": mine,
                "bar_x": _x(r.bar),
                "bar_top": y + 1,
                "bar_bottom": y + 37,
                "passed": r.passed,
            }
        )
    ticks = [{"x": _x(t / 100), "label": f"{t}%"} for t in (0, 25, 50, 75, 100)]
    height = CHART_TOP + len(rows) * CHART_ROW + 4
    return {
        "rows": rows,
        "ticks": ticks,
        "height": height,
        "width": CHART_LEFT + CHART_WIDTH + 70,
        "left": CHART_LEFT,
        "axis_bottom": height - 6,
        "live": any(r["live"] for r in rows),
    }


# --- datasets, prompts, workers ---------------------------------------------------------


def mapping_view(m: DatasetMapping) -> dict[str, Any]:
    """A prompt's bars on a dataset: accuracy and each further bar in a few words."""
    try:
        more = Bars.parse(m.min_accuracy, m.bars).describe()
    except UsageError:  # a bar stored by an older version that no longer parses: shown raw
        more = [json.dumps(m.bars, sort_keys=True, default=str)]
    return {"prompt": m.prompt_name, "min_accuracy": m.min_accuracy, "more": more}


def history(rows: Iterable[dict]) -> list[dict[str, Any]]:
    """A prompt's live versions, newest first: which update's candidate each is, when, for a
    rollback the version it restored, who and why, for a version rolled back away from its
    hold (an apply of its config is refused until overridden), and the canary rollout it ran."""
    keys = (
        "version",
        "update_id",
        "applied_at",
        "config_hash",
        "kind",
        "restored_version",
        "actor",
        "reason",
        "hold",
        "rollout",
    )
    found = sorted(({k: row.get(k) for k in keys} for row in rows), key=lambda h: h["version"] or 0, reverse=True)
    return _said_once(found)


def _said_once(history_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A rollback's reason said once (issue 49.5): the rollout worker's rollback writes the
    same words as the rollback's reason, the version's hold and its canary's reason; the
    newest row says them, a later copy is left out (``None``)."""
    said: set[str] = set()

    def once(reason: Any) -> Any:
        if not reason:
            return reason
        text = str(reason)
        if text in said:
            return None
        said.add(text)
        return reason

    out = []
    for h in history_rows:
        h = {**h, "reason": once(h["reason"])}
        for key in ("rollout", "hold"):
            if isinstance(h[key], dict) and h[key].get("reason"):
                h[key] = {**h[key], "reason": once(h[key]["reason"])}
        out.append(h)
    return out


def rollout_view(rollout: dict) -> dict[str, Any]:
    """A canary rollout for the prompt page: its arms' counts and rates, the difference and
    its always-valid bounds in points (each one-sided at the confidence; a rollout decided
    before the one-sided tests stored a two-sided interval, and says so), against −max_drop."""
    figures = rollout.get("figures") or {}
    lo, hi = figures.get("interval") or (None, None)
    config = rollout.get("config") or {}
    canary, stable = figures.get("canary") or {"n": 0, "correct": 0}, figures.get("stable") or {"n": 0, "correct": 0}
    return {
        "r": rollout,
        "canary_rate": canary["correct"] / canary["n"] if canary["n"] else None,
        "stable_rate": stable["correct"] / stable["n"] if stable["n"] else None,
        "percent": float(config.get("canary_percent", 10)),
        "canary": canary,
        "stable": stable,
        "difference": None if figures.get("difference") is None else figures["difference"] * 100,
        "interval": None if lo is None else (lo * 100, cast(float, hi) * 100),  # a pair: hi is there with lo
        "one_sided": figures.get("bounds") is not None,
        "max_drop": float(config.get("max_drop", 0)) * 100,
        "confidence": float(config.get("confidence", 0.95)) * 100,
        "min_feedback": config.get("min_feedback"),
        "feedback_progress": _feedback_progress(canary["n"], stable["n"], config.get("min_feedback")),
        "max_hours": config.get("max_hours"),
        "hours": figures.get("hours"),
    }


def _feedback_progress(canary_n: int, stable_n: int, needed: Any) -> dict[str, Any] | None:
    """How far each arm is towards ``min_feedback`` (the outcomes each needs before the rule
    decides): the fewer of the two, as the rule waits for both."""
    if not isinstance(needed, int) or isinstance(needed, bool) or needed <= 0:
        return None
    least = min(canary_n, stable_n)
    return {"least": least, "needed": needed, "done": least >= needed, "share": min(1.0, least / needed)}


def worker_view(w: WorkerRow, now: dt.datetime) -> dict[str, Any]:
    """A live worker and the age of its heartbeat (this server's clock against the
    database's UTC stamp: both UTC, so only clock skew between the two machines shows)."""
    return {
        "w": w,
        "age": max(0.0, (now - w.heartbeat_at).total_seconds()),
        "up": max(0.0, (now - w.started_at).total_seconds()),
    }


def fleet_view(fleet: FleetCounts) -> dict[str, Any]:
    items = fleet.items or {}
    return {
        "f": fleet,
        "queue": items.get("pending", 0) + items.get("leased", 0),  # (STOPPED: never called)
        "update_states": sorted(fleet.updates.items()),
        "run_states": sorted(fleet.runs.items()),
        "item_states": list(items.items()),
    }
