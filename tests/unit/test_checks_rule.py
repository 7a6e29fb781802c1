"""Issue 50.1: a checks decision's spec is untrusted: each bad check is refused in one line
naming where; patterns are RE2 and bounded; the checks read the answer and the item's
columns; a bar per check is refused for a kind that cannot compute it."""

from __future__ import annotations

import time

import pytest

from gate.errors import SpecError
from gate.kinds import kind_of
from gate.kinds.bar_fit import refusal
from gate.prompt.checks import parse_checks
from gate.prompt.spec import parse_spec
from gate.verdict.bars import Bars


def spec(decision, **extra):
    return parse_spec(
        {
            "name": "drafter",
            "model": "m",
            "messages": [{"role": "user", "content": "{{ item.ticket }}"}],
            "decision": decision,
            **extra,
        }
    )


@pytest.mark.parametrize(
    ("checks", "where"),
    [
        ({"a": {"contains": ""}}, "decision.checks.a.contains"),
        ({"a": {"nope": 1}}, "decision.checks.a.nope"),
        ({"a": {"regex": "(a)\\1"}}, "decision.checks.a.regex"),
        ({"a": {"regex": "((a|b){0,100}){9}c"}}, "decision.checks.a.regex"),
        ({"a": {"max_words": -1}}, "decision.checks.a.max_words"),
        ({"a": {"is_json": "yes"}}, "decision.checks.a.is_json"),
        ({"a": {"json_equals": {"path": "x"}}}, "decision.checks.a.json_equals"),
        ({"a": {"contains": {"column": "x", "y": 1}}}, "decision.checks.a.contains"),
        ({"a b": {"contains": "x"}}, "decision.checks"),
        ({"a": {"contains": "x", "regex": "y"}}, "decision.checks.a"),
        ({f"c{i}": {"max_chars": 1} for i in range(33)}, "decision.checks"),
    ],
)
def test_a_bad_check_is_refused_in_one_line_naming_it(checks, where):
    with pytest.raises(SpecError) as refused:
        spec({"type": "checks", "checks": checks})
    assert refused.value.field == where and "\n" not in str(refused.value)


def test_checks_read_the_answer_and_the_item():
    rule = parse_checks(
        {
            "order": {"contains": {"column": "order_id"}},
            "no_refund": {"not-icontains": "REFUND"},
            "short": {"max_words": 6},
            "status": {"json_equals": {"path": "result.status", "value": "open"}},
            "hello": {"starts-with": "{"},
            "js": {"is-json": True},
        },
        None,
    )
    item = {"order_id": "ORD-7"}
    assert rule.failed_names(rule.failed('{"result": {"status": "open"}, "id": "ORD-7"}', item)) == []
    assert rule.failed_names(rule.failed("A refund for ORD-7 is on its way to you now", item)) == [
        "hello",
        "js",
        "no_refund",
        "short",
        "status",
    ]
    assert "order" in rule.failed_names(rule.failed('{"x": 1}', {}))  # a missing column fails: nothing compared


def test_a_hostile_answer_costs_little():
    rule = parse_checks(
        {"p": {"regex": "(a+)+$"}, "j": {"contains_json": True}, "s": {"json_equals": {"path": "a", "value": 1}}}, None
    )
    answer = "a" * 30_000 + "!" + "[" * 50_000
    started = time.perf_counter()
    assert rule.failed(answer, {}) != 0
    assert time.perf_counter() - started < 0.5


def test_checks_before_a_judge_and_a_check_bar_for_a_label_prompt():
    judged = spec({"type": "judge", "judge": "j", "pass": ["good"], "checks": {"a": {"max_chars": 10}}})
    assert judged.decision.checks is not None and judged.decision.to_dict()["checks"] == {"a": {"max_chars": 10}}
    with pytest.raises(SpecError, match="decision.checks: checks go before a grading judge"):
        spec({"type": "judge", "judge": "j", "compare": "live", "checks": {"a": {"max_chars": 10}}})
    with pytest.raises(SpecError, match="^labels: "):
        spec({"type": "checks", "checks": {"a": {"max_chars": 1}}}, labels=["a", "b"])
    bars = Bars.parse("0.9", {"min_check_rate": {"mentions_order": 0.95}})
    label_kind = kind_of(spec("first_word", labels=["a", "b"]).decision)
    assert refusal("p", "d", label_kind, bars) == (
        "p × d: bar min_check_rate cannot be computed for a label prompt (decided by one label): "
        "drop it from the mapping"
    )
    assert (
        refusal("p", "d", kind_of(spec({"type": "checks", "checks": {"a": {"max_chars": 1}}}).decision), bars) is None
    )
    with pytest.raises(Exception, match="min_check_rate: 'a b' is not a check name"):
        Bars.parse("0.9", {"min_check_rate": {"a b": 0.9}})
