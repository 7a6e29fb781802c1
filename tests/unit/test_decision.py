"""Reading a model's answer as a label: the parse table."""

import pytest

from gate.kinds.label import parse_decision
from gate.prompt.spec import Decision, parse_spec

YES_NO = ("yes", "no")
URGENCY = ("urgent", "routine")
REFUND = ("eligible", "not_eligible")
SPACED = ("eligible", "not eligible", "not")

FIRST_WORD = Decision()


@pytest.mark.parametrize(
    "labels, raw, expected",
    [
        # casing
        (YES_NO, "yes", "yes"),
        (YES_NO, "Yes", "yes"),
        (YES_NO, "NO", "no"),
        (URGENCY, "URGENT", "urgent"),
        (("Yes", "No"), "yes", "Yes"),  # canonical casing is the spec's
        # punctuation, quotes, markdown, whitespace
        (YES_NO, "Yes.", "yes"),
        (YES_NO, "**Yes.**", "yes"),
        (YES_NO, "  \n no!\n", "no"),
        (YES_NO, '"no"', "no"),
        (YES_NO, "'Yes'", "yes"),
        (YES_NO, "`yes`", "yes"),
        (YES_NO, "> No, it is not.", "no"),
        (YES_NO, "# Yes", "yes"),
        (YES_NO, "(yes)", "yes"),
        (YES_NO, "“Yes”", "yes"),
        (URGENCY, "Urgent - the store is down.", "urgent"),
        (URGENCY, "routine\n\nReason: a how-to question", "routine"),
        (YES_NO, "<think>The user says no... but</think>Yes", "yes"),
        # word boundary: a label must be a whole word
        (YES_NO, "yesterday", None),
        (YES_NO, "nothing", None),
        (URGENCY, "urgently", None),
        # first word only
        (YES_NO, "The answer is yes", None),
        (YES_NO, "Answer: yes", None),
        (YES_NO, "maybe", None),
        (YES_NO, "", None),
        (YES_NO, "   ", None),
        (YES_NO, None, None),
        (YES_NO, "...", None),
        # underscores, hyphens and spaces are interchangeable
        (REFUND, "not_eligible", "not_eligible"),
        (REFUND, "Not eligible.", "not_eligible"),
        (REFUND, "not-eligible", "not_eligible"),
        (REFUND, "ELIGIBLE", "eligible"),
        (REFUND, "ineligible", None),
        # multi-word labels: the longest label the answer starts with
        (SPACED, "Not eligible, the order is too old", "not eligible"),
        (SPACED, "not sure", "not"),
        (SPACED, "eligible", "eligible"),
    ],
)
def test_first_word(labels, raw, expected):
    assert parse_decision(FIRST_WORD, labels, raw) == expected


@pytest.mark.parametrize(
    "field, raw, expected",
    [
        ("decision", '{"decision": "yes"}', "yes"),
        ("decision", '{"decision": "NO"}', "no"),
        ("decision", '  {"decision": " Yes. "}  ', "yes"),
        ("decision", '```json\n{"decision": "no", "reason": "x"}\n```', "no"),
        ("decision", 'Sure! ```json\n{"decision": "yes"}\n``` hope that helps', "yes"),
        ("decision", '```\n{"decision": "yes"}\n```', "yes"),
        ("decision", 'Here you go: {"decision": "no"} -- done', "no"),
        ("result.label", '{"result": {"label": "yes", "confidence": 0.9}}', "yes"),
        ("answers.1", '{"answers": ["no", "yes"]}', "yes"),
        ("decision", '{"decision": true}', None),  # true is not a label here
        ("decision", '{"decision": "maybe"}', None),
        ("decision", '{"label": "yes"}', None),  # wrong field
        ("result.label", '{"result": "yes"}', None),
        ("decision", '["yes"]', None),
        ("decision", "yes", None),  # not JSON at all
        ("decision", '{"decision": "yes"', None),  # broken JSON
        ("decision", '{"decision": null}', None),
    ],
)
def test_json(field, raw, expected):
    assert parse_decision(Decision("json", field=field), YES_NO, raw) == expected


def test_json_booleans_compare_as_their_text():
    assert parse_decision(Decision("json", field="ok"), ("true", "false"), '{"ok": false}') == "false"


@pytest.mark.parametrize(
    "pattern, labels, raw, expected",
    [
        (r"Answer:\s*(\w+)", YES_NO, "Reasoning... Answer: Yes", "yes"),
        (r"Answer:\s*(\w+)", YES_NO, "Answer: no. Answer: yes", "no"),  # first match
        (r"(?i)label=(\w+)", URGENCY, "LABEL=routine", "routine"),
        (r"\b(urgent|routine)\b", URGENCY, "I think this is ROUTINE", None),  # pattern is case-sensitive
        (r"(?i)\b(urgent|routine)\b", URGENCY, "I think this is ROUTINE", "routine"),
        (r"urgent|routine", URGENCY, "clearly urgent!", "urgent"),  # no group: the whole match
        (r"Answer:\s*(\w+)", YES_NO, "no answer here", None),
        (r"Answer:\s*(\w+)", YES_NO, "Answer: perhaps", None),
        (r"(x)?urgent", URGENCY, "urgent", None),  # group 1 did not take part
    ],
)
def test_regex(pattern, labels, raw, expected):
    assert parse_decision(Decision("regex", pattern=pattern), labels, raw) == expected


def test_a_spec_supplies_decision_and_labels():
    spec = parse_spec(
        {
            "name": "p",
            "model": "m",
            "labels": ["Urgent", "Routine"],
            "messages": [{"role": "user", "content": "{{ item.text }}"}],
        }
    )
    assert parse_decision(spec, None, "urgent.") == "Urgent"
    assert parse_decision(spec, spec.labels, "nope") is None
    json_spec = parse_spec(
        {"name": "p", "model": "m", "decision": "json", "messages": [{"role": "user", "content": "x"}]}
    )
    assert parse_decision(json_spec, None, '{"decision": "No"}') == "no"
