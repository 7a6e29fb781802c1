"""gate.contract.codec: the service's dataclasses to JSON and back, exactly; untrusted data shaped
like the wire's own tags stays data."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

from gate.contract.codec import decode, encode
from gate.records import DatasetPreview, DatasetVersion, VersionRow

HOSTILE = {
    "$decimal": "not a number",
    "$map": {"$decimal": "1"},
    "plain": {"$decimal": "x"},
    "nested": [{"$decimal": "0.1"}, {"$map": 3}],
    "real": Decimal("0.125"),
}


def through_json(cls, value):
    return decode(cls, json.loads(json.dumps(encode(value))))


def test_data_shaped_like_the_tags_stays_data():
    assert through_json(dict, HOSTILE) == HOSTILE
    row = VersionRow(0, "<i0>", "yes", {"text": {"$decimal": "boom"}, "n": Decimal("2.50")}, "h")
    version = DatasetVersion(
        1, 1, "READY", "c" * 64, 1, {"yes": 1}, "s3://b/k", {}, None, dt.datetime(2026, 12, 1, 12, 0, 0, 123456)
    )
    preview = DatasetPreview(version, [row])
    assert through_json(DatasetPreview, preview) == preview


def test_exact_numbers_and_times_stay_exact():
    value = {"bar": Decimal("0.9000"), "at": "2026-12-01T12:00:00"}
    assert through_json(dict, value) == value and isinstance(through_json(dict, value)["bar"], Decimal)
