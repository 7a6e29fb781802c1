"""The smaller frictions a team met adopting the gate (issue 50.6), each as it read before:
``decision: judge`` said "decision.judge: None is not a valid name"; the spend line at submit
cut "(recorded); up to 24 more ..., 0 reuse)" out of the whole line; an argument sent to
another function than expected read ``order_id: *missing*``; the drift diff showed a prompt's
text as one quoted YAML string with a blank line per line break."""

from __future__ import annotations

import json

import pytest

from gate.contract.drift import config_diff
from gate.errors import SpecError
from gate.prompt.answer_reading import read_reply
from gate.prompt.spec import parse_spec
from gate.prompt.tool_decision import wrong_calls
from gate.report.markdown_filters import decided
from gate.report.text import spend_line
from gate.report.text_sections import answer
from gate.service.views import confusion_view

MESSAGES = [{"role": "user", "content": "{{ item.ticket }}"}]


def test_a_judge_decision_given_as_a_string_says_it_needs_a_mapping_with_the_judge():
    with pytest.raises(SpecError) as refused:
        parse_spec({"name": "reply", "model": "m", "messages": MESSAGES, "decision": "judge"})
    said = str(refused.value)
    assert "None is not a valid name" not in said
    assert said.startswith("decision: a judged decision is a mapping that names its judge: decision: {type: judge")


def test_the_spend_at_submit_is_the_bound_and_the_caps_never_a_cut_of_the_calls():
    spend = {"calls_bound": 100, "calls_made": 5, "calls_unrecorded": 24, "max_calls_per_update": 300}
    assert spend_line(spend, started=False) == "at most 100 model calls before retries (cap 300 calls per update)"
    assert spend_line({"calls_bound": 100}, started=False) == "at most 100 model calls before retries"
    assert spend_line(spend) == (
        "5 made (recorded); up to 24 more may have been made by workers that died, 0 reused "
        "(100 model calls before retries; cap 300 calls per update)"
    )


def router():
    tools = [
        {"name": "refund", "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}},
        {"name": "lookup_order", "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}},
    ]
    decision = {"type": "tool_call", "fields": {"order_id": "exact"}}
    return parse_spec({"name": "r", "model": "m", "messages": MESSAGES, "tools": tools, "decision": decision})


def test_an_argument_sent_to_another_function_says_so_not_missing():
    spec = router()
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "refund", "arguments": '{"order_id": "ORD-1"}'}}
        ],
    }
    got = read_reply(spec, "", message).decision
    want = json.dumps({"function": "lookup_order", "order_id": "ORD-1"})
    wrong = wrong_calls(spec.decision.fields, got, want)
    (order_id,) = [w for w in wrong if w["field"] == "order_id"]
    assert order_id["sent_to"] == "refund" and order_id["missing"]
    assert "order\\_id: *sent to refund instead*" in str(decided(got, wrong, True))
    assert "order_id=sent to refund instead" in answer(got, wrong, True)


def test_the_drift_diff_shows_a_prompts_text_line_by_line():
    rules = "Classify the message.\n- yes: {}\n- no: beta\ndefault: no"
    live, file = ({"name": "p1", "messages": [{"role": "system", "content": rules.format(y)}]} for y in ("a", "a, g"))
    assert config_diff(live, file, "prompts/p1.yaml", 1)[3:] == (
        "   content: |-",
        "     Classify the message.",
        "-    - yes: a",
        "+    - yes: a, g",
        "     - no: beta",
        "     default: no",
    )


def test_rows_without_a_label_have_no_row_in_the_status_pages_confusion_matrix():
    """A judged prompt's dataset without labels: its rows' "" is no expected label (the
    markdown report's matrix leaves it out too: tests/integration/test_unlabelled_datasets.py)."""
    assert confusion_view({"": {"good": 16, "bad": 14}}) == (["bad", "good"], [])
    _, rows = confusion_view({"good": {"good": 3}, "": {"bad": 1}})
    assert [r["expected"] for r in rows] == ["good"]
