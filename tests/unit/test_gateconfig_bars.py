"""The bars of a gate config entry beyond min_accuracy: parsed into the JSON the mapping
stores, and every wrong one a SpecError naming the file and the field (no database)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gate import gateconfig
from gate.errors import SpecError


def config(tmp_path, entry: dict):
    (tmp_path / "d.csv").write_text("item_id,expected_decision,text\ni1,yes,a\n")
    data = {"datasets": {"d": {"source": "d.csv"}}, "prompts": {"p1": [{"dataset": "d", "min_accuracy": 0.9, **entry}]}}
    return gateconfig.parse_config(data, file="gate.yaml", base_dir=tmp_path)


def test_an_accuracy_only_entry_has_no_extra_bars(tmp_path):
    (bar,) = config(tmp_path, {}).bars
    assert (bar.prompt, bar.dataset, bar.min_accuracy, bar.bars) == ("p1", "d", Decimal("0.9"), None)


def test_every_extra_bar_is_parsed(tmp_path):
    (bar,) = config(
        tmp_path,
        {
            "max_broken": 0,
            "min_recall": {"yes": 0.95, "no": 0.8},
            "min_precision": {"yes": "0.9"},
            "max_latency_p95_ms": 250,
            "max_cost_per_1k_items": 0.25,
        },
    ).bars
    assert bar.bars == {
        "max_broken": 0,
        "min_recall": {"no": "0.8", "yes": "0.95"},
        "min_precision": {"yes": "0.9"},
        "max_latency_p95_ms": 250,
        "max_cost_per_1k_items": "0.25",
    }


def test_bar_fields_lists_the_extra_bars():
    assert gateconfig.BAR_FIELDS == (
        "dataset",
        "min_accuracy",
        "max_broken",
        "min_recall",
        "min_precision",
        "max_latency_p95_ms",
        "max_cost_per_1k_items",
        "max_drop",
        "confidence",
        "early_stop",
        "max_error_rate",
        "min_field_accuracy",
        "min_slice_accuracy",
        "min_slice_items",
        "slice_by",
        "protected",
        "accept_breaks",
        "judge_corrected",
        "max_loss_rate",
        "max_inconsistent",
        "sentinels",
        "min_judge_j",
        "min_judge_kappa",
        "min_judge_items",
        "min_check_rate",
    )


def test_max_drop_confidence_and_early_stop_in_a_gate_config(tmp_path):
    (bar,) = config(tmp_path, {"max_drop": 2, "confidence": 0.9, "early_stop": False}).bars
    assert bar.bars == {"max_drop": "2", "confidence": "0.9", "early_stop": False}
    (bar,) = config(tmp_path, {"max_drop": 1.5, "early_stop": True}).bars
    assert bar.bars == {"max_drop": "1.5"}  # on and 95 %: the defaults, not written


@pytest.mark.parametrize(
    "entry, field, reason",
    [
        ({"max_broken": -1}, "max_broken", "max_broken -1 is not a whole number ≥ 0"),
        ({"max_broken": "none"}, "max_broken", "is not a whole number ≥ 0"),
        ({"max_latency_p95_ms": 0.5}, "max_latency_p95_ms", "is not a whole number ≥ 0"),
        ({"max_cost_per_1k_items": "cheap"}, "max_cost_per_1k_items", "is not a number of US dollars"),
        ({"max_cost_per_1k_items": -1}, "max_cost_per_1k_items", "is out of range"),
        ({"min_recall": 0.9}, "min_recall", "must map a label to a fraction"),
        ({"min_recall": {"yes": 95}}, "min_recall", "min_recall[yes] 95 is outside [0, 1]"),
        ({"min_precision": {"": 0.9}}, "min_precision", "a label must be a non-empty string"),
        ({"min_precision": {"yes": None}}, "min_precision", "min_precision[yes] None is not a number"),
        ({"max_drop": 0.02 * -1}, "max_drop", "is out of range: 0 to 100 accuracy points"),
        ({"confidence": 0.3}, "confidence", "is out of range: at least 0.5 and below 1"),
        ({"early_stop": "off"}, "early_stop", "is not true or false"),
        (
            {"max_brokn": 0},
            "max_brokn",
            "unknown field; did you mean max_broken?; a bar has dataset, min_accuracy, max_broken, min_recall",
        ),
    ],
)
def test_a_bad_extra_bar_names_its_field(tmp_path, entry, field, reason):
    with pytest.raises(SpecError) as raised:
        config(tmp_path, entry)
    assert raised.value.file == "gate.yaml" and raised.value.field == f"prompts.p1[0].{field}"
    assert reason in raised.value.reason and "\n" not in str(raised.value)


def test_an_extra_bar_does_not_replace_min_accuracy(tmp_path):
    with pytest.raises(SpecError) as raised:
        gateconfig.parse_config(
            {"datasets": {}, "prompts": {"p1": [{"dataset": "d", "max_broken": 0}]}},
            file="gate.yaml",
            base_dir=tmp_path,
        )
    assert raised.value.field == "prompts.p1[0].dataset"  # (d undeclared: checked first)
    (tmp_path / "d.csv").write_text("item_id,expected_decision,text\ni1,yes,a\n")
    with pytest.raises(SpecError) as raised:
        gateconfig.parse_config(
            {"datasets": {"d": {"source": "d.csv"}}, "prompts": {"p1": [{"dataset": "d", "max_broken": 0}]}},
            file="gate.yaml",
            base_dir=tmp_path,
        )
    assert raised.value.field == "prompts.p1[0].min_accuracy" and "is required" in raised.value.reason


def test_a_bar_change_reads_as_one_line():
    change = gateconfig.Change("bar-changed", "p1 × d", "0.9", "0.9, max broken 0", ("p1", "d"))
    assert str(change) == "bar p1 × d: min accuracy 0.9 → 0.9, max broken 0"
