"""Conversations from the dataset: a row's ``messages`` (a JSON list of turns, with the
assistant's tool calls and their results) checked at import, one line naming the row, the
column and the turn (never its text); a prompt's ``- history: item.messages`` entry
inserting it into the request at its place, counted by the template-field check."""

from __future__ import annotations

import csv
import json

import pytest

from gate.calls.llm import render_messages
from gate.datasets.sources import open_source
from gate.domain.admission import fields_read
from gate.errors import DatasetError, ModelCallError, SpecError
from gate.prompt.conversation import MAX_TURNS, ConversationProblem, check_conversation, last_turns
from gate.prompt.spec import parse_spec

SECRET = "my card number is 4111 1111 1111 1111"
TURNS = [
    {"role": "user", "content": "Where is ORD-1?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup_order", "arguments": {"order_id": "ORD-1"}},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "in transit"},
    {"role": "user", "content": "Refund it."},
]


def rows_of(path):
    reader = open_source(str(path))
    rows, cursor = [], None
    while True:
        page = reader.read_page(cursor, 100)
        rows += page.rows
        if page.next_cursor is None:
            return rows
        cursor = page.next_cursor


def test_a_conversation_is_checked_and_a_calls_arguments_sent_as_json_text():
    turns = check_conversation(TURNS)
    assert turns[1]["tool_calls"][0]["function"]["arguments"] == '{"order_id": "ORD-1"}'
    assert turns[2] == {"role": "tool", "content": "in transit", "tool_call_id": "call_1"}
    assert check_conversation(json.dumps(TURNS)) == turns  # a CSV cell holds it as JSON text


@pytest.mark.parametrize(
    "turns, problem",
    [
        ([], "must be a non-empty JSON list of turns"),
        ({"role": "user"}, "must be a non-empty JSON list of turns"),
        ("not json", "is not a JSON list of turns"),
        ([{"role": "robot", "content": SECRET}], "turn 1: role must be one of system, user, assistant, tool"),
        ([{"role": "user", "content": SECRET, "name": "bob"}], "turn 1: unknown field 'name'"),
        ([{"role": "user", "content": 42}], "turn 1: content must be text"),
        ([{"role": "user", "content": "x" * 40000}], "turn 1: content is over 32,768 characters"),
        ([{"role": "tool", "tool_call_id": "c1", "content": SECRET}], "turn 1: a tool turn must answer a call"),
        (TURNS[:2] + [{"role": "user", "content": SECRET}], "turn 3: every call of the assistant turn before it"),
        (TURNS[:2], "the last assistant turn's calls have no tool turns answering them"),
        (
            [TURNS[0], {**TURNS[1], "tool_calls": [{"id": "a", "function": {"name": "x; rm -rf"}}]}],
            "turn 2: a tool call is",
        ),
        (
            [TURNS[0], {**TURNS[1], "tool_calls": TURNS[1]["tool_calls"] * 2}],
            "turn 2: two calls have the same id",
        ),
        ([{"role": "user", "content": "hi"}] * (MAX_TURNS + 1), f"has {MAX_TURNS + 1} turns: at most {MAX_TURNS}"),
    ],
)
def test_a_value_that_is_no_conversation_says_why_in_one_line_without_quoting_it(turns, problem):
    with pytest.raises(ConversationProblem) as caught:
        check_conversation(turns)
    message = str(caught.value)
    assert message.startswith(problem) and "\n" not in message and SECRET not in message


def test_the_import_checks_a_conversation_column_and_names_the_row(tmp_path):
    path = tmp_path / "c.jsonl"
    rows = [
        {"item_id": "c1", "messages": TURNS, "expected_decision": "refund"},
        {"item_id": "c2", "messages": [{"role": "wizard", "content": SECRET}], "expected_decision": "none"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DatasetError) as caught:
        rows_of(path)
    assert (
        str(caught.value)
        == f"{path}: line 2: item c2: column messages: turn 1: role must be one of system, user, assistant, tool"
    )


def test_a_csv_cell_holds_the_conversation_as_json_text_and_the_item_sees_the_list(tmp_path):
    path = tmp_path / "c.csv"
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["item_id", "expected_decision", "messages", "other_messages"])
        writer.writerow(["c1", "refund", json.dumps(TURNS), ""])
        writer.writerow(["c2", "none", '[{"role": "user"', ""])
    with pytest.raises(DatasetError, match=r"line 3: item c2: column messages: is not valid JSON$"):
        rows_of(path)
    path.write_text(path.read_text().splitlines()[0] + "\n" + path.read_text().splitlines()[1] + "\n")
    (row,) = rows_of(path)
    assert row.input["messages"] == TURNS and row.input["other_messages"] == ""


def spec_with_history(history: str = "item.messages"):
    return parse_spec(
        {
            "name": "router",
            "model": "m",
            "messages": [
                {"role": "system", "content": "Route {{ item.channel }} chats."},
                {"history": history},
                {"role": "user", "content": "Answer the last turn."},
            ],
        }
    )


def test_a_history_entry_inserts_the_rows_conversation_at_its_place():
    spec = spec_with_history()
    messages = render_messages(spec, {"channel": "web", "messages": TURNS})
    assert messages[0] == {"role": "system", "content": "Route web chats."}
    assert messages[1:5] == check_conversation(TURNS)
    assert messages[5] == {"role": "user", "content": "Answer the last turn."}
    assert spec.to_config()["messages"][1] == {"history": "item.messages"}
    assert fields_read(spec) == ("channel", "messages")


def test_an_item_without_a_conversation_is_an_error_of_its_own():
    spec = spec_with_history()
    with pytest.raises(ModelCallError, match="conversation: the item has no conversation in field messages") as caught:
        render_messages(spec, {"channel": "web"})
    assert caught.value.kind == "template" and not caught.value.retryable
    with pytest.raises(ModelCallError, match=r"conversation: field messages: turn 1: role must be one of"):
        render_messages(spec, {"channel": "web", "messages": [{"role": "robot", "content": SECRET}]})


@pytest.mark.parametrize(
    "entry, problem",
    [
        ({"history": "item.notes"}, r"messages\[1\]\.history: must be item\.messages or item\.<name>_messages"),
        ({"history": "item.messages", "role": "user"}, r"messages\[1\]: a history entry has history alone"),
        ({"history": "{{ item.messages }}"}, r"messages\[1\]\.history: must be item\.messages"),
    ],
)
def test_a_history_entry_names_a_conversation_field(entry, problem):
    with pytest.raises(SpecError, match=problem):
        parse_spec({"name": "r", "model": "m", "messages": [{"role": "system", "content": "x"}, entry]})
    assert spec_with_history("item.support_messages").messages[1].history == "support_messages"


def test_a_report_shows_the_last_turns_cut_short():
    shown = last_turns(TURNS + [{"role": "assistant", "content": "y" * 1000}])
    assert [t["role"] for t in shown] == ["tool", "user", "assistant"]
    assert len(shown[-1]["text"]) == 300 and shown[-1]["text"].endswith("…")
    assert last_turns(TURNS[:3])[1]["text"] == 'lookup_order({"order_id": "ORD-1"})'
    assert last_turns("not a conversation") is None
