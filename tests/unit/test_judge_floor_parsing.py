"""The judge floors (issue 46.2, gate/verdict/judge_floors.py): parsed from a mapping's bars
with defaults J ≥ 0.5, κ ≥ 0.4, 30 items; a value below a hard minimum (J 0.2, κ 0.2, 20
items) refused in one line at map and in the gate config; the figure that failed named with
its value, at a judge's own gate (J per label against the rest, a pairwise judge on κ and
items) and at submit (J for the candidate's pass labels)."""

from __future__ import annotations

from decimal import Decimal

import pytest
import yaml

from gate import gateconfig
from gate.errors import UsageError
from gate.verdict.bars import Bars
from gate.verdict.judge_floors import JudgeFloors, own_figures, submit_figures

GOOD_TO_ALL = {"good": {"good": 20}, "bad": {"good": 20}}


def test_the_defaults_and_a_mapping_that_raises_or_lowers_them():
    assert Bars.parse("0.9").judge.floors == JudgeFloors(Decimal("0.5"), Decimal("0.4"), 30)
    bars = Bars.parse("0.9", {"min_judge_j": "0.7", "min_judge_kappa": 0.2, "min_judge_items": "20"})
    assert bars.judge.floors == JudgeFloors(Decimal("0.7"), Decimal("0.2"), 20)
    assert bars.extra() == {"min_judge_j": "0.7", "min_judge_kappa": "0.2", "min_judge_items": 20}
    assert Bars.parse("0.9", bars.extra()) == bars  # pinned and read back alike
    assert "judge floors J ≥ 0.7, κ ≥ 0.2, 20 items" in bars.describe()
    assert Bars.parse("0.9", {"min_judge_j": "0.5"}).extra() is None  # the default is not written


@pytest.mark.parametrize(
    "extra, said",
    [
        ({"min_judge_j": "0.1"}, "min_judge_j '0.1' is below the hard minimum 0.2"),
        ({"min_judge_j": 0}, "min_judge_j 0 is below the hard minimum 0.2"),
        ({"min_judge_kappa": "0.19"}, "min_judge_kappa '0.19' is below the hard minimum 0.2"),
        ({"min_judge_items": 19}, "min_judge_items 19 is below the hard minimum 20"),
        ({"min_judge_items": "many"}, "min_judge_items 'many' is not a whole number"),
        ({"min_judge_items": True}, "min_judge_items True is not a whole number"),
        ({"min_judge_items": "²⁵"}, "is not a whole number"),
        ({"min_judge_j": "1.5"}, "min_judge_j '1.5' is outside [0, 1]"),
        ({"min_judge_kappa": "x"}, "min_judge_kappa 'x' is not a number"),
    ],
)
def test_a_floor_below_its_hard_minimum_or_not_a_number_is_refused_in_one_line(extra, said):
    with pytest.raises(UsageError) as err:
        Bars.parse("0.9", extra)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_the_gate_config_refuses_a_floor_below_its_hard_minimum(tmp_path):
    (tmp_path / "d.csv").write_text("item_id,expected_decision\n1,a\n")
    entry = {"dataset": "d", "min_accuracy": 0.9, "min_judge_items": 10}
    (tmp_path / "gate.yaml").write_text(
        yaml.safe_dump({"datasets": {"d": {"source": "d.csv"}}, "prompts": {"p": [entry]}})
    )
    with pytest.raises(Exception) as err:
        gateconfig.load_config(tmp_path / "gate.yaml")
    assert "min_judge_items 10 is below the hard minimum 20" in str(err.value)


def test_a_judge_that_says_good_to_everything_fails_on_its_youden_j_at_its_own_gate():
    figures = own_figures(GOOD_TO_ALL, pairwise=False)
    assert (figures.items, figures.kappa, figures.youden) == (40, 0.0, 0.0)
    assert JudgeFloors().miss(figures) == "Youden's J 0.00 (sensitivity 1.00, specificity 0.00) < 0.5"
    # a pairwise judge is held on κ and items only: the same answers fail on κ
    assert JudgeFloors().miss(own_figures(GOOD_TO_ALL, pairwise=True)) == "Cohen's κ 0.00 < 0.4"


def test_a_multi_label_judge_is_held_on_its_lowest_j_one_label_against_the_rest():
    confusion = {"great": {"great": 20}, "ok": {"ok": 20}, "bad": {"great": 20}}  # bad never told from great
    assert JudgeFloors().miss(own_figures(confusion, pairwise=False)) == (
        "Youden's J 0.00 for bad against the rest (sensitivity 0.00, specificity 1.00) < 0.5"
    )


def test_items_are_checked_first_then_j_then_kappa():
    agreeing = {"good": {"good": 12}, "bad": {"bad": 12}}
    assert JudgeFloors().miss(own_figures(agreeing, False)) == "24 human items < 30"
    assert JudgeFloors(items=20).miss(own_figures(agreeing, False)) is None


def test_at_submit_j_is_the_candidates_pass_labels_and_a_missing_side_fails():
    figures = submit_figures({"n": 40, "kappa": 0.9}, (18, 20, 19, 20))
    assert figures.youden == pytest.approx(0.85) and JudgeFloors().miss(figures) is None
    assert figures.describe() == "Youden's J 0.85 (sensitivity 0.90, specificity 0.95), Cohen's κ 0.90, 40 human items"
    none_failed = submit_figures({"n": 40, "kappa": None}, (40, 40, 0, 0))
    assert JudgeFloors().miss(none_failed) == "Youden's J n/a (its human items do not both pass and fail) < 0.5"
    pairwise = submit_figures({"n": 60, "kappa": 0.3}, None)
    assert JudgeFloors().miss(pairwise) == "Cohen's κ 0.30 < 0.4"
