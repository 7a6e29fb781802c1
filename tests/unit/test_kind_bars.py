"""Each decision kind says which bars its runs compute today (``DecisionKind.bars_computable``,
issue 45 point 1), as data: nothing refuses a mapping's other bars yet (their checks say why
they cannot be had). The table is held here so that a change to it is a visible one."""

from __future__ import annotations

from gate.kinds.registry import KINDS
from gate.verdict.bars import EXTRA_KEYS, ITEM_KEYS

EVERY = {
    "min_accuracy",
    "max_latency_p95_ms",
    "max_cost_per_1k_items",
    "max_error_rate",
    "min_slice_accuracy",
    "protected",
}
LIVE = {"max_broken", "max_drop"}
TABLE = {
    "label": EVERY | LIVE | {"min_recall", "min_precision"},
    "fields": EVERY | LIVE | {"min_field_accuracy"},
    "tool_call": EVERY | LIVE | {"min_recall", "min_precision", "min_field_accuracy"},
    "judged": EVERY | LIVE | {"judge_corrected", "sentinels", "min_check_rate"},
    "checks": EVERY | LIVE | {"min_check_rate"},
    "compared": EVERY | LIVE | {"max_loss_rate", "max_inconsistent", "sentinels"},
}


def test_each_kind_names_the_bars_it_computes():
    kinds = {kind.name: kind for kind in KINDS.values()} | {"compared": _compared()}
    assert {name: set(kind.bars_computable) for name, kind in kinds.items()} == TABLE


def test_the_bars_named_are_bars():
    known = {"min_accuracy"} | set(EXTRA_KEYS) | set(ITEM_KEYS)
    for name, bars in TABLE.items():
        assert bars <= known, (name, bars - known)


def test_a_graded_judge_computes_the_bars_on_live_answers():
    """Issue 46.4: live's answers graded by the same judge are paired with the candidate's."""
    assert LIVE <= TABLE["judged"]


def _compared():
    from gate.kinds.compared import COMPARED

    return COMPARED


def test_each_kind_names_its_report_sections():
    kinds = {kind.name: kind for kind in KINDS.values()} | {"compared": _compared()}
    assert {name: set(kind.report_sections) for name, kind in kinds.items()} == {
        "label": {"labels"},
        "fields": {"labels", "fields"},
        "tool_call": {"labels", "fields", "tool_calls"},
        "judged": {"judge"},
        "compared": {"judge"},
        "checks": {"checks"},
    }
