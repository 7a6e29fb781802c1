"""`status --json` is a contract release pipelines parse: gate/schemas/status.schema.json
(draft 2020-12) describes it. The real CLI and real workers on SQLite produce the
documents: an open update, an applied one (bars n/a, no live version to compare with) and
a checked one compared with the live version (fixed and broken items). A broken document
must fail, so the validation cannot pass vacuously."""

from __future__ import annotations

import copy
import json

import pytest
from jsonschema import Draft202012Validator
from support.cli import ROOT
from support.helpers import write_rule_rows
from support.workers_harness import WorkerFleet, worker_env
from test_cli import cli, prompt_file

from gate.mockllm import MockLLMServer
from gate.schemas import status_schema

SCHEMA_FILE = ROOT / "gate" / "schemas" / "status.schema.json"
# Answers i3 and i5 (live right) "no", i10 (live wrong) and i12 (live right) "yes":
# 1 fixed, 3 broken against RULES.
WORSE_RULES = "Classify the message.\n- no: 3, 5\n- yes: alpha, 10, 12\n- no: beta\ndefault: no"


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """status --json (and wait --json) of real updates, by name."""
    tmp = tmp_path_factory.mktemp("status_schema")
    db_url = f"sqlite:///{tmp / 'gate.db'}"
    assert cli(db_url, "db", "upgrade").returncode == 0
    data = write_rule_rows(tmp / "d.csv", 40, wrong_every=10)  # the rules score 90 %
    assert cli(db_url, "dataset", "add", "d1", "--source", str(data)).returncode == 0
    mapped = cli(
        db_url,
        "dataset",
        "map",
        "p1",
        "d1",
        "--min-accuracy",
        "0.5",
        "--max-broken",
        "5",
        "--min-recall",
        "yes=0.5",
        "--min-precision",
        "no=0.5",
        "--max-latency-p95-ms",
        "60000",
        "--max-drop",
        "50",
    )
    assert mapped.returncode == 0, mapped.stderr

    def status(uid):
        shown = cli(db_url, "status", uid, "--json")
        assert shown.returncode in (0, 1, 3), shown.stderr
        return json.loads(shown.stdout)

    out = {}
    uid = json.loads(cli(db_url, "submit", prompt_file(tmp / "good.yaml"), "--mode", "apply", "--json").stdout)["id"]
    out["open"] = status(uid)
    with MockLLMServer() as llm:
        fleet = WorkerFleet(worker_env(db_url, llm.base_url), tmp)
        fleet.start(1)
        try:
            waited = cli(db_url, "wait", uid, "--timeout", "60", "--json")
            assert waited.returncode == 0, waited.stdout + waited.stderr
            out["applied (wait)"] = json.loads(waited.stdout)
            worse = prompt_file(tmp / "worse.yaml", rules=WORSE_RULES)
            uid2 = json.loads(cli(db_url, "submit", worse, "--json").stdout)["id"]
            waited = cli(db_url, "wait", uid2, "--timeout", "60", "--json")
            assert waited.returncode == 0, waited.stdout + waited.stderr
            out["compared (wait)"] = json.loads(waited.stdout)
        finally:
            fleet.stop_all()
    out["applied"], out["compared"] = status(uid), status(uid2)
    return out


def validator() -> Draft202012Validator:
    return Draft202012Validator(status_schema())


def problems(document) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator().iter_errors(document)]


def test_the_schema_is_valid_draft_2020_12_and_ships_in_the_package():
    schema = status_schema()
    Draft202012Validator.check_schema(schema)
    assert schema == json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_every_documented_property_says_what_it_means():
    def walk(node, at):
        if isinstance(node, dict):
            for name, prop in (node.get("properties") or {}).items():
                assert isinstance(prop.get("description"), str) and prop["description"], f"{at}/{name}"
            for key, value in node.items():
                walk(value, f"{at}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{at}/{i}")

    walk(status_schema(), "#")


@pytest.mark.parametrize("name", ["open", "applied (wait)", "applied", "compared (wait)", "compared"])
def test_status_json_validates(reports, name):
    assert problems(reports[name]) == []


def test_the_documents_exercise_the_report_fields(reports):
    """The validation above is not vacuous about the report's fields: each kind of value
    the schema allows is really there."""
    opened, applied, compared = reports["open"], reports["applied"], reports["compared"]
    assert opened["status"] == "PENDING" and opened["finished_at"] is None
    assert opened["runs"][0]["calls"] is None and opened["runs"][0]["checks"] == []

    run = applied["runs"][0]
    assert applied["status"] == "APPLIED" and run["passed"] is True
    assert run["comparison"] is None and run["baseline_note"] and run["broken"] == []
    states = {(c["bar"], c["label"]): c["state"] for c in run["checks"]}
    assert states == {
        ("min_accuracy", None): "pass",
        ("max_broken", None): "n/a",
        ("min_precision", "no"): "pass",
        ("min_recall", "yes"): "pass",
        ("max_latency_p95_ms", None): "pass",
        ("max_drop", None): "n/a",
    }
    assert all(c["note"] for c in run["checks"] if c["state"] == "n/a")
    assert set(run["labels"]) == {"yes", "no"} and run["calls"]["latency_ms"]["timed"] == 40
    assert run["fields_read"] == [{"field": "text", "rows": 40, "of": 40, "optional": False}]

    run = compared["runs"][0]
    assert compared["status"] == "PASSED" and run["baseline_note"] is None
    comparison = run["comparison"]
    assert (comparison["fixed"], comparison["broken"], comparison["paired"]) == (1, 3, 40)
    assert comparison["live_update_id"] == applied["id"] and comparison["significant"] is False
    assert len(comparison["interval"]) == 2 and len(comparison["live_interval"]) == 2
    assert [b["item_id"] for b in run["broken"]] == ["i3", "i5", "i12"]
    assert {
        "bar": "max_broken",
        "label": None,
        "limit": "5",
        "value": "3",
        "state": "pass",
        "note": None,
        "reason": None,
    } in run["checks"]
    (drop,) = [c for c in run["checks"] if c["bar"] == "max_drop"]
    assert drop["state"] == "pass" and drop["conclusive"] is True and drop["limit"] == "\u221250 pts"
    assert drop["interval"] == comparison["difference_interval"] and drop["interval"][0] < -0.05 < drop["interval"][1]
    assert comparison["difference_points"] == -5.0 and comparison["confidence"] == 0.95
    assert compared["spend"]["calls_made"] + compared["spend"]["calls_reused"] >= 40
    assert compared["spend"]["calls_bound"] == 40 and compared["full"] is False
    assert run["stop"] is None and run["stopped"] == 0


def _set(path, value):
    def mutate(doc):
        *parents, last = path
        node = doc
        for key in parents:
            node = node[key]
        node[last] = value

    return mutate


def _delete(path):
    def mutate(doc):
        *parents, last = path
        node = doc
        for key in parents:
            node = node[key]
        del node[last]

    return mutate


BROKEN = {
    "status MAYBE": _set(["status"], "MAYBE"),
    "no runs": _delete(["runs"]),
    "an undocumented top-level key": _set(["verdict"], "ok"),
    "attempts not integers": _set(["attempts", "retried_items"], "none"),
    "a timestamp not in UTC ISO form": _set(["created_at"], "yesterday"),
    "a run without comparison": _delete(["runs", 0, "comparison"]),
    "an undocumented run key": _set(["runs", 0, "verdict"], "ok"),
    "a check state maybe": _set(["runs", 0, "checks", 0, "state"], "maybe"),
    "an unknown bar": _set(["runs", 0, "checks", 0, "bar"], "min_vibes"),
    "a p-value above 1": _set(["runs", 0, "comparison", "p_value"], 1.5),
    "an interval of 3 numbers": _set(["runs", 0, "comparison", "interval"], [0.1, 0.2, 0.3]),
    "significant as a string": _set(["runs", 0, "comparison", "significant"], "no"),
    "a precision as text": _set(["runs", 0, "labels", "yes", "precision"], "high"),
    "a label without f1": _delete(["runs", 0, "labels", "yes", "f1"]),
    "a latency as text": _set(["runs", 0, "calls", "latency_ms", "p95"], "210 ms"),
    "an undocumented broken-item key": _set(["runs", 0, "broken", 0, "severity"], "high"),
    "reused keyed by a non-id": _set(["runs", 0, "reused"], {"latest": 3}),
    "a field's coverage as text": _set(["runs", 0, "fields_read", 0, "rows"], "all"),
    "an undocumented field-read key": _set(["runs", 0, "fields_read", 0, "branch"], "else"),
    "a conclusive flag as text": _set(["runs", 0, "checks", -1, "conclusive"], "yes"),
    "a fail reason of its own": _set(["runs", 0, "checks", -1, "reason"], "unlucky"),
    "a difference interval of one number": _set(["runs", 0, "comparison", "difference_interval"], [0.1]),
    "a stop of an unknown kind": _set(["runs", 0, "stop"], {"kind": "bored", "sentence": None, "calls_saved": 0}),
    "spend without calls made": _delete(["spend", "calls_made"]),
    "stopped items as text": _set(["runs", 0, "stopped"], "some"),
}


@pytest.mark.parametrize("mutation", list(BROKEN), ids=list(BROKEN))
def test_a_broken_document_fails(reports, mutation):
    document = copy.deepcopy(reports["compared"])
    BROKEN[mutation](document)
    assert problems(document), f"{mutation}: the schema accepted it"


def test_metrics_and_pinned_are_open():
    """Internal fields may grow without breaking the contract."""
    document = {
        "id": 1,
        "prompt_name": "p1",
        "mode": "check",
        "status": "PENDING",
        "candidate_config": {"name": "p1", "model": "m", "messages": []},
        "candidate_hash": "0" * 64,
        "base_version": 0,
        "source": {},
        "reason": None,
        "created_at": "2026-01-31T12:34:56Z",
        "started_at": None,
        "finished_at": None,
        "attempts": dict.fromkeys(
            [
                "retried_items",
                "extra_attempts",
                "max_attempt",
                "throttled_calls",
                "throttle_wait_seconds",
                "rate_limited_calls",
            ],
            0,
        ),
        "runs": [
            {
                "figure": {"of": "accuracy", "shown": "n/a", "as_judged": None},
                "run_id": 1,
                "dataset": "d1",
                "bar": 0.9,
                "status": "PENDING",
                "total": 0,
                "scored": 0,
                "matches": 0,
                "errors": 0,
                "pending": 0,
                "accuracy": None,
                "passed": None,
                "reason": None,
                "row_count": 0,
                "content_hash": None,
                "source_version": None,
                "source_uri": "d.csv",
                "metrics": {"anything": [1, 2]},
                "failures": [],
                "dataset_version_id": 1,
                "pinned": {"new_pin": {"x": 1}},
                "reused": {},
                "checks": [],
                "comparison": None,
                "baseline_note": None,
                "labels": {},
                "calls": None,
                "broken": [],
                "cost": None,
            }
        ],
    }
    assert problems(document) == []
