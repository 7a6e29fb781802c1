"""Rows stored by older versions decode to the same records (``Pinned``, ``RunFigures``): real
``prompt_run.pinned`` and ``metrics`` JSON, one run of each decision kind (tests/unit/stored/runs.json, dumped from the
acceptance and integration tests' runs: label, judged, a judge's comparison with live,
fields, a tool call with fields and by label), decode and re-encode byte for byte (the
fingerprint compares the stored text), and each decodes to the kind it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gate.kinds import kind_of
from gate.records.metrics import JudgeFigures, RunFigures, StopFigures
from gate.records.pinned import Pinned, PinnedJudge

STORED = json.loads((Path(__file__).parent / "stored" / "runs.json").read_text())
KINDS = {
    "first_word": "label",
    "judge": "judged",
    "judge_compare": "compared",
    "fields": "fields",
    "tool_call_fields": "tool_call",
    "tool_call": "tool_call",
}


@pytest.mark.parametrize("row", STORED, ids=[r["kind"] for r in STORED])
def test_a_stored_pin_decodes_and_encodes_byte_for_byte(row):
    pinned = Pinned.of(json.loads(row["pinned"]))
    assert json.dumps(pinned.to_json()) == row["pinned"]
    assert kind_of(pinned.decision).name == KINDS[row["kind"].split(" ")[0]]


@pytest.mark.parametrize("row", [r for r in STORED if '"judge": {' in r["pinned"]], ids=lambda r: r["kind"])
def test_a_judge_pin_is_a_record(row):
    judge = Pinned.of(json.loads(row["pinned"])).judge
    assert isinstance(judge, PinnedJudge) and judge.name and judge.trials >= 1
    assert (judge.compare is not None) == (judge.passing is None)
    assert json.dumps(judge.to_json()) == json.dumps(json.loads(row["pinned"])["judge"])


def test_a_row_without_a_pin_and_one_with_unknown_keys_keep_their_json():
    assert Pinned.of(None).to_json() is None
    older = {"bar": "0.9", "someday": {"a": 1}, "trials": {"n": 3, "rule": "majority", "needed": 2}, "judge": {}}
    pinned = Pinned.of(older)
    assert pinned.to_json() == older and list(pinned.to_json()) == list(older)
    assert pinned.trials is not None and pinned.trials.n == 3 and pinned.calls_per_item == 3
    assert not pinned.judge  # an empty mapping is no judge, as it was


@pytest.mark.parametrize("row", STORED, ids=[r["kind"] for r in STORED])
def test_stored_figures_decode_and_encode_byte_for_byte(row):
    figures = RunFigures.of(json.loads(row["metrics"]))
    assert json.dumps(figures.to_json()) == row["metrics"]
    assert figures.extra == {}  # every key a run's figures hold is a field of the record
    assert figures.scored == json.loads(row["metrics"])["scored"] and not figures.drifted


@pytest.mark.parametrize("row", [r for r in STORED if '"judge": {' in r["metrics"]], ids=lambda r: r["kind"])
def test_a_judged_runs_figures_are_records(row):
    judge = RunFigures.of(json.loads(row["metrics"])).judge
    assert isinstance(judge, JudgeFigures) and judge.scored > 0
    assert (judge.pairwise is not None) == (row["kind"] == "judge_compare")
    assert json.dumps(judge.to_json()) == json.dumps(json.loads(row["metrics"])["judge"])


def test_figures_of_no_row_and_a_drifted_judge():
    assert RunFigures.of(None).to_json() == {} and RunFigures.of(None).judge is None
    drifted = {"judge": {"name": "j", "sentinels": {"agreed": 1, "judged": 9, "drifted": True}}, "later": 1}
    figures = RunFigures.of(drifted)
    assert figures.drifted and figures.to_json() == drifted and figures.extra == {"later": 1}


@pytest.mark.parametrize("row", STORED, ids=[r["kind"] for r in STORED])
def test_a_stored_pin_written_by_attribute_is_the_same_text(row):
    """Submit writes a pin by attribute (``made`` the first keys, ``extended`` the rest, as
    ``request_keys.pin`` and ``Gate.submit`` do): the text is the one stored."""
    from gate.records.json_codec import extended, made

    def values(record, keys):
        return {attr: getattr(record, attr) for attr in ("passing" if k == "pass" else k for k in keys)}

    stored = Pinned.of(json.loads(row["pinned"]))
    assert stored.keys is not None
    written = extended(made(Pinned, **values(stored, stored.keys[:8])), **values(stored, stored.keys[8:]))
    assert json.dumps(written.to_json()) == row["pinned"]
    if stored.judge:
        judge = made(PinnedJudge, **values(stored.judge, stored.judge.keys))
        assert json.dumps(judge.to_json()) == json.dumps(json.loads(row["pinned"])["judge"])


@pytest.mark.parametrize("row", STORED, ids=[r["kind"] for r in STORED])
def test_figures_built_as_the_record_write_the_bytes_the_dict_did(row):
    """finalize and reconcile build the record (``made``, then ``extended`` as they once
    updated a dict): the same keys in the same order, a key written again in its place."""
    stored = json.loads(row["metrics"])
    keys = list(stored)
    half = len(keys) // 2
    figures = RunFigures.made(**{k: stored[k] for k in keys[:half]})
    figures = figures.extended(**{k: stored[k] for k in keys[half:]}).extended(**{keys[0]: stored[keys[0]]})
    assert json.dumps(figures.to_json()) == row["metrics"]
    assert figures.calls is None or not isinstance(figures.calls, dict)  # a part is its record


def test_a_stop_is_built_as_its_record():
    stop = StopFigures.made(kind="early_stop").extended(missed=[], sentence=None, best={"matches": 1})
    assert stop.to_json() == {"kind": "early_stop", "missed": [], "sentence": None, "best": {"matches": 1}}
    figures = RunFigures.made(total=3, stop=stop).extended(stop=stop.extended(sentence="s"), total=4)
    assert list(figures.to_json()) == ["total", "stop"] and figures.to_json()["stop"]["sentence"] == "s"
