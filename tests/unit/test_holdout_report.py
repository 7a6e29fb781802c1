"""What a reader who is not admin gets of a report on a holdout (a dataset whose rows only
admin reads: ``gate.service.dataset_access.holdout_items_hidden``), built by the real ``run_report``
from a run's metrics as finalize and reconcile write them (issue 33, findings 1 and 4): no
item detail (the first failing item and its error, which the run's reason leaves out), and
the slices by rank, not by value — a slice's value is a cell of the holdout, and ``slice_by``
a free-text column listed every text. The counts, bars and verdict stay; admin, and any
reader of a dataset a repository holds, still see it all."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from types import SimpleNamespace

import pytest
from jsonschema import Draft202012Validator
from test_report_fields import DECISION, metrics

from gate.contract.codec import encode
from gate.records import ItemSample, Run, RunCounts, Update
from gate.records.pinned import Pinned
from gate.report.markdown import render_report_markdown
from gate.report.text import render_text
from gate.report.update import UpdateReport, run_report
from gate.schemas import status_schema
from gate.service.dataset_access import holdout_items_hidden
from gate.verdict.reasons import ITEM_DETAIL

T0 = dt.datetime(2024, 5, 1, 12, 0, 0)
SECRETS = ("SECRET-EMAIL-TEXT", "SECRET-CHAT-TEXT", "hold-03", "hold-07")
SOURCES = {"holdout": "https://data.example/holdout.csv", "repo": "upload://datasets/repo.csv"}


def holdout_metrics() -> dict:
    """A candidate some of whose items failed (the first one's error in the item detail),
    sliced by a free-text column, one protected item broken."""
    out = metrics()
    out["slices"]["slices"][0]["value"] = "SECRET-EMAIL-TEXT"
    out["slices"]["slices"][1]["value"] = "SECRET-CHAT-TEXT"
    out["protected"]["samples"][0]["item_id"] = "hold-07"
    out[ITEM_DETAIL] = {"first_error": {"item_id": "hold-03", "error": "template: has no attribute 'x'"}}
    return out


def report(dataset: str) -> UpdateReport:
    pinned = {
        "decision": DECISION,
        "bars": {"slice_by": "channel", "min_slice_accuracy": "0.8", "min_slice_items": 5, "max_broken": 5},
    }
    run = Run(
        *(1, 41, 1, dataset, SOURCES[dataset], {}, "DONE", Decimal("0.85"), 40, "3f" * 32, None, None, T0, None, 1),
        *(holdout_metrics(), None, T0, T0, T0, 5, Pinned.of(pinned), "candidate", 2),
    )
    failures = [ItemSample("hold-03", "yes", "no", "MISMATCH", "no", None)]
    update = Update(
        41,
        "p1",
        "check",
        "REJECTED",
        {"name": "p1", "model": "m", "messages": []},
        "ab" * 32,
        2,
        {},
        "rejected",
        T0,
        T0,
        T0,
    )
    names = ("retried_items", "extra_attempts", "max_attempt", "throttled_calls", "throttle_wait_seconds")
    attempts = dict.fromkeys((*names, "rate_limited_calls"), 0)
    return UpdateReport(update, [run_report(run, RunCounts(total=40, match=36, mismatch=4), failures)], attempts)


def as_reader(dataset: str) -> UpdateReport:
    """The version each run pinned is what says whether its rows are readable."""
    gate = SimpleNamespace(
        dataset_version=lambda name, vid: SimpleNamespace(source_uri=SOURCES[name], source_options={})
    )
    return holdout_items_hidden(report(dataset), gate)


def everything_of(shown: UpdateReport) -> str:
    return "\n".join(
        [
            json.dumps(shown.to_dict(), default=str),
            json.dumps(encode(shown), default=str),
            render_report_markdown(shown),
            render_text(shown),
        ]
    )


def test_a_reader_of_a_holdouts_report_gets_its_slices_by_rank_and_no_item_detail():
    shown = as_reader("holdout")
    text = everything_of(shown)
    for secret in SECRETS:
        assert secret not in text, secret
    run = shown.runs[0]
    assert [s["value"] for s in run.slices["slices"]] == ["slice 1", "slice 2", "slice 3"]
    assert [s["value"] for s in run.metrics["slices"]["slices"]] == ["slice 1", "slice 2", "slice 3"]
    assert [(s["items"], s["matches"]) for s in run.slices["slices"]] == [(30, 29), (8, 6), (2, 1)]  # the counts stay
    failing = [c for c in run.checks if c["bar"] == "min_slice_accuracy"]
    assert [(c["label"], c["value"], c["state"]) for c in failing] == [("channel=slice 2", "75.0%", "fail")]
    assert run.passed is False and ITEM_DETAIL not in run.metrics
    Draft202012Validator(status_schema()).validate(json.loads(json.dumps(shown.to_dict(), default=str)))


@pytest.mark.parametrize("dataset", ["repo", "holdout"])
def test_admin_and_the_reader_of_a_repositorys_dataset_see_it_all(dataset):
    full = report(dataset) if dataset == "holdout" else as_reader(dataset)  # admin is never filtered
    text = everything_of(full)
    for secret in SECRETS:
        assert secret in text, secret
    assert "channel=SECRET-CHAT-TEXT" in [c["label"] for c in full.runs[0].checks]
    assert "the first: item hold-03: template: has no attribute 'x'" in render_text(_errored(full))


def _errored(full: UpdateReport) -> UpdateReport:
    """The report of the same run ended in ERROR: the text report says the item detail."""
    from dataclasses import replace

    return replace(full, runs=[replace(full.runs[0], status="ERROR", reason="1 of 40 items of d could not be scored")])
