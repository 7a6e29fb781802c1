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
        written = pin(made, VERSION, Decimal("0.9"))
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
