"""The decision kinds (gate/kinds/): the registry maps each stored decision type to its kind,
every kind implements the one protocol (``DecisionKind``), and what a kind says agrees with
what the prompt file says (its labels kept, pinned and keyed; how it is read and counted)."""

from __future__ import annotations

import inspect

import pytest

from gate.kinds import DecisionKind, kind_of, rule_of
from gate.kinds.checks import CHECKS
from gate.kinds.compared import COMPARED
from gate.kinds.fields import FIELDS
from gate.kinds.judged import JUDGED
from gate.kinds.label import LABEL
from gate.kinds.live import JUDGED_PAIRS, PAIRED_ITEMS
from gate.kinds.registry import KINDS
from gate.kinds.tool_call import TOOL_CALL
from gate.prompt.request_keys import decision_rule
from gate.prompt.spec import parse_spec

MESSAGES = [{"role": "user", "content": "{{ item.text }}"}]


def spec(decision, **extra):
    return parse_spec({"name": "p", "model": "m", "messages": MESSAGES, "decision": decision, **extra})


@pytest.mark.parametrize(
    "stored, kind",
    [
        (None, LABEL),
        ({}, LABEL),
        ({"type": "first_word"}, LABEL),
        ({"type": "json", "field": "d"}, LABEL),
        ({"type": "regex", "pattern": "x"}, LABEL),
        ({"type": "fields", "fields": {"a": "exact"}}, FIELDS),
        ({"type": "tool_call"}, TOOL_CALL),
        ({"type": "judge", "judge": "j", "pass": ["good"]}, JUDGED),
        ({"type": "judge", "judge": "j", "compare": "live"}, COMPARED),
        ({"type": "checks", "checks": {"a": {"max_chars": 1}}}, CHECKS),
        ({"type": "from-a-later-version"}, LABEL),
    ],
)
def test_a_stored_decision_has_its_kind(stored, kind):
    assert kind_of(stored) is kind


def test_every_kind_implements_the_protocol():
    kinds = {*KINDS.values(), COMPARED}
    assert all(isinstance(k, DecisionKind) and not inspect.isabstract(type(k)) for k in kinds)
    assert {k.name for k in kinds} == {"label", "fields", "tool_call", "judged", "compared", "checks"}
    assert {k.live for k in kinds} == {PAIRED_ITEMS, JUDGED_PAIRS} and COMPARED.live is JUDGED_PAIRS


def test_a_parsed_decision_and_its_stored_rule_have_the_same_kind():
    made = [
        spec("first_word"),
        spec({"type": "json", "field": "d"}),
        spec({"type": "fields", "fields": {"a": "exact"}}),
        spec({"type": "judge", "judge": "j", "pass": ["good"]}),
        spec({"type": "judge", "judge": "j", "compare": "live"}),
    ]
    for s in made:
        assert kind_of(s.decision) is kind_of(decision_rule(s)) is kind_of(s.to_config()["decision"])


def test_what_a_kind_keeps_pins_and_counts():
    label, fields = spec("first_word"), spec({"type": "fields", "fields": {"a": "exact"}})
    judged = spec({"type": "judge", "judge": "j", "pass": ["good"]})
    assert "labels" in label.to_config() and "labels" in decision_rule(label)
    assert "labels" not in fields.to_config() and "labels" not in decision_rule(fields)
    assert "labels" not in judged.to_config() and "labels" in decision_rule(judged)  # pinned, never kept
    assert JUDGED.keyed_rule(decision_rule(judged)) == {"type": "judge"}  # a new judge reuses the answers
    stored = fields.to_config()["decision"]
    assert rule_of(stored) == fields.decision.fields and not kind_of(stored).counts_by_label(stored)
    assert LABEL.counts_by_label(None) and LABEL.maps_row_labels(None) and not JUDGED.maps_row_labels(None)
    assert (LABEL.shows_labels, JUDGED.shows_labels, COMPARED.shows_labels) == (True, False, False)
    assert (JUDGED.judge_calls(3), COMPARED.judge_calls(3), LABEL.judge_calls(3)) == (3, 6, 0)
