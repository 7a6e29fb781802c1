"""Reasons an older gate stored named items (issue 33): they are read cut where they began
to (``gate.verdict.reasons.without_legacy_items``); a reason written now is read as it is."""

from __future__ import annotations

import pytest

from gate.verdict.reasons import detail_text, errors_reason, unknown_labels_reason, without_legacy_items

OLD = [
    (
        "3 of 20 items of hold could not be scored; the first: item hold-00: template: template refers to a missing "
        "item field: 'dict object' has no attribute 'HOLDSUBJ-00 | SECRET' (see the failing items)",
        "3 of 20 items of hold could not be scored (see the failing items)",
    ),
    (
        "could not be scored: a: 1 of 9 items of a could not be scored; the first: item x: timeout: t (see the "
        "failing items); hold: 2 of 9 items of hold could not be scored; the first: item hold-03: SECRET (see the "
        "failing items)",
        "could not be scored: a: 1 of 9 items of a could not be scored (see the failing items)",
    ),
    (
        "could not be scored: hold: dataset hold: 20 row(s) with a label the prompt does not have (labels: urgent, "
        "nope): item hold-01: 'SECRET'; item hold-03: 'SECRET'",
        "could not be scored: hold: dataset hold: 20 row(s) with a label the prompt does not have (labels: urgent, "
        "nope)",
    ),
    (
        "dataset hold: item hold-09: template exceeded its budget of 2 s of CPU, 64 MiB per item (out of CPU time); "
        "the run was stopped before any model call",
        "dataset hold: (an item's detail, left out)",
    ),
    (
        "missed: hold: 2 protected items broke (hold-03, hold-05); hold 5.0% < bar 80%",
        "missed: hold: 2 protected items broke",
    ),
    (
        "missed: hold min_slice_accuracy[text=SECRET] 0.0% < bar 90%",
        "missed: hold min_slice_accuracy (a slice's value, left out)",
    ),
]


@pytest.mark.parametrize("stored, read", OLD)
def test_a_reason_an_older_gate_stored_is_read_without_its_items(stored, read):
    assert without_legacy_items(stored) == read
    assert "SECRET" not in read and "hold-" not in read


NEW = [
    errors_reason(3, 20, "hold", {"template": 2, "timeout": 1}),
    errors_reason(
        40, 40, "d", {"budget": 40}, "budget: not rendered: the template exceeded its budget on another item"
    ),
    unknown_labels_reason("hold", 20, 2, ["urgent", "nope"]),
    "missed: d: 1 protected item broke; d 5.0% < bar 80%; d max_broken 2 > bar 0",
    "missed: d min_slice_accuracy[channel]: a slice at 80.0% < bar 85%",
    "stopped early: d: stopped after 140 of 1,000 items: even if every remaining item matched, accuracy would be "
    "at most 84.2 % < 90 %",
    None,
    "",
]


@pytest.mark.parametrize("reason", NEW)
def test_a_reason_written_now_is_read_as_it_is(reason):
    assert without_legacy_items(reason) == reason


def test_the_item_detail_in_one_line_for_the_reports():
    assert detail_text(None) is None and detail_text({"total": 3}) is None
    first = {"item_detail": {"first_error": {"item_id": "i3", "error": "timeout: t"}}}
    assert detail_text(first) == "the first: item i3: timeout: t"
    labels = {"item_detail": {"unknown_labels": {"maybe": 2}, "examples": [{"item_id": "i1", "expected": "maybe"}]}}
    assert detail_text(labels) == "labels the prompt does not have: 'maybe' (2 rows); e.g. item i1: 'maybe'"
    misfit = {"item_detail": {"misfit": "dataset h: field c (label): 2 row(s) expect one of 1 value(s) ..."}}
    assert detail_text(misfit) == "dataset h: field c (label): 2 row(s) expect one of 1 value(s) ..."
