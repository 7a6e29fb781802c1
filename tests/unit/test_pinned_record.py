"""A run's pinned inputs as a record (gate/records/pinned.py): every key submit writes is a
field of it, and the record writes it back as it was; a row written before a key existed
reads it as None; a key the record does not know stays in what a report shows, in its place,
so the report's JSON keeps its shape."""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

from gate.prompt.request_keys import pin
from gate.prompt.spec import parse_spec
from gate.records import DatasetVersion
from gate.records.pinned import Pinned
from gate.report.judge_view import shown_pinned

FIELDS = {f.name for f in dataclasses.fields(Pinned)} - {"keys", "extra", "memo"}
VERSION = DatasetVersion(
    7, 1, "READY", "c" * 64, 20, {"yes": 10, "no": 10}, "file://d.csv", {}, None, dt.datetime(2026, 1, 1)
)


def spec(**extra):
    return parse_spec(
        {"name": "p1", "model": "m", "messages": [{"role": "user", "content": "{{ item.text }}"}], **extra}
    )


def test_every_key_the_pin_writes_is_a_field():
    for made in (spec(), spec(trials=3)):
        pinned = pin(made, VERSION, Decimal("0.9"))
        assert isinstance(pinned, Pinned) and (pinned.trials is not None) == (made.trials > 1)
        written = pinned.to_json()
        assert written is not None
        assert ("trials" in written) == (made.trials > 1)
        assert set(written) <= FIELDS, set(written) - FIELDS
        record = Pinned.of(written)
        assert record.to_json() == written and list(record.to_json()) == list(written) and record.stored == written
        assert all(getattr(record, k) is not None for k in written if written[k] is not None)


def test_an_old_row_reads_missing_keys_as_none_and_keeps_unknown_ones():
    assert Pinned.of(None) == Pinned() and Pinned.of(None).stored is None and shown_pinned(Pinned.of(None)) is None
    old = {"rows": 20, "bar": "0.9", "from_a_later_version": {"x": 1}, "model": "m"}
    record = Pinned.of(old)
    assert (record.rows, record.bar, record.model, record.trials, record.judge, record.early_stop) == (
        20,
        "0.9",
        "m",
        None,
        None,
        None,
    )
    shown = shown_pinned(record)
    assert shown == old and list(shown) == list(old)  # as stored, in its order


def test_a_judges_provider_is_left_out_of_what_is_shown_and_the_rest_keeps_its_place():
    stored = {
        "rows": 4,
        "judge": {"name": "j", "provider": {"url": "u"}, "live": {"provider": {}, "version": 2}},
        "z": 1,
    }
    shown = shown_pinned(Pinned.of(stored))
    assert list(shown) == ["rows", "judge", "z"] and shown["judge"] == {"name": "j", "live": {"version": 2}}
    assert stored["judge"]["provider"] == {"url": "u"}  # the record's JSON is not changed by showing it


def test_a_pin_written_by_attribute_is_stored_in_the_order_given():
    from gate.records.json_codec import extended
    from gate.records.json_codec import made as built
    from gate.records.pinned import PinnedBaseline, PinnedJudge

    same = built(PinnedBaseline, same_config=True, live_version=3, update_id=9)
    assert same.to_json() == {"same_config": True, "live_version": 3, "update_id": 9}
    assert list(same.to_json()) == ["same_config", "live_version", "update_id"]
    judge = extended(built(PinnedJudge, name="j", passing=("ok",), error_rates=(1, 2, 3, 4)), sentinels=2)
    assert list(judge.to_json()) == ["name", "pass", "error_rates", "sentinels"]
    assert judge.to_json()["pass"] == ["ok"] and judge.to_json()["error_rates"] == [1, 2, 3, 4]
    run = extended(pin(spec(), VERSION, Decimal("0.9")), bars=None, baseline=same, baseline_note=None)
    stored = run.to_json()
    assert stored is not None and list(stored)[-3:] == ["bars", "baseline", "baseline_note"]
    assert stored["baseline"] == same.to_json() and stored["baseline_note"] is None
    again = extended(run, bars={"max_broken": 1})
    assert list(again.to_json() or {}) == list(stored) and again.memo is not run.memo
    assert Pinned.of(stored).to_json() == stored


def test_submit_writes_a_pin_with_its_bars_parsed_once_beside_it():
    from gate.kinds.pin import RunPin
    from gate.records.json_codec import made as built
    from gate.records.pinned import PinnedJudge
    from gate.verdict.bars import Bars

    made_spec = spec()
    raw = {"max_broken": 2, "early_stop": False}
    bars = Bars.parse(Decimal("0.9"), raw)
    run = RunPin.begun(pin(made_spec, VERSION, Decimal("0.9")), bars, raw, made_spec.decision)
    assert run.bars is bars and run.kind.name == "label" and run.rule == made_spec.decision
    assert not run.may_stop_early(False, None)  # the bars say no
    run = run.extended(price=None, early_stop=False, baseline=None, baseline_note="no live version yet")
    stored = run.stored.to_json()
    assert stored is not None and stored["bars"] == raw
    assert list(stored)[-5:] == ["bars", "price", "early_stop", "baseline", "baseline_note"]
    open_bars = RunPin.begun(pin(made_spec, VERSION, Decimal("0.9")), Bars.parse("0.9"), None, made_spec.decision)
    assert open_bars.stored.bars is None and open_bars.may_stop_early(False, None)
    assert not open_bars.may_stop_early(True, None)  # --full
    assert not open_bars.may_stop_early(False, built(PinnedJudge, name="j", corrected=True))
    assert open_bars.may_stop_early(False, built(PinnedJudge, name="j", corrected=False))
