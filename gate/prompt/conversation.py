"""A conversation from the dataset, inserted among a prompt's messages.

A message entry ``- history: item.messages`` stands for the row's conversation: a JSON
list of turns, inserted at that point of the request::

    messages:
      - role: system
        content: You route support conversations ...
      - history: item.messages              # the row's turns, in order
    # a row: {"item_id": "c-1", "messages": [
    #   {"role": "user", "content": "Where is my parcel?"},
    #   {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
    #       "function": {"name": "lookup_order", "arguments": "{\\"order_id\\": \\"A-1\\"}"}}]},
    #   {"role": "tool", "tool_call_id": "call_1", "content": "in transit"},
    #   {"role": "user", "content": "It is a week late, I want my money back."}], ...}

A turn is ``{role, content}`` with role ``system``, ``user``, ``assistant`` or ``tool``;
an assistant turn may call tools (``tool_calls``, OpenAI's form; ``arguments`` a JSON text,
or an object that is sent as its JSON), and each of its calls is answered, right after it,
by one ``tool`` turn naming the call (``tool_call_id``). A field holds a conversation when
it is named ``messages`` or ``<something>_messages``: the import checks those columns
(``gate.datasets.conversations``; a CSV cell holds the list as JSON text), and a prompt may
insert only such a field, so every conversation a request carries was checked at import,
and is checked again (the same bounded walk) when the request is built.

A conversation is a row's value: bounded in turns (``MAX_TURNS``), calls per turn and
characters, and a problem is one line naming the turn by its number, never quoting it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from gate.errors import SpecError

HISTORY_RE = re.compile(r"item\.((?:[A-Za-z_][A-Za-z0-9_]{0,54}_)?messages)")  # fullmatch
TURN_ROLES = ("system", "user", "assistant", "tool")
MAX_TURNS = 100
MAX_TURN_CHARS = 32 * 1024
MAX_CALLS_PER_TURN = 16
CALL_ID_RE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
FUNCTION_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
SHOWN_TURNS = 3  # the last turns a report shows of a failing item
SHOWN_CHARS = 300


class ConversationProblem(ValueError):
    """Why a value is not a conversation, in one line (the caller names the row)."""


def is_conversation_field(name: str) -> bool:
    return HISTORY_RE.fullmatch(f"item.{name}") is not None


def parse_history(value: Any, where: str, file: str | None) -> str:
    """The item field a ``history`` entry inserts."""
    found = HISTORY_RE.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        raise SpecError(
            file,
            where,
            "must be item.messages or item.<name>_messages: the row's conversation (the import checks "
            "those columns as conversations)",
        )
    return found.group(1)


def decoded(value: Any) -> Any:
    """A conversation as a row holds it: a list, or (a CSV cell) its JSON text."""
    if isinstance(value, str):
        text = value.strip()
        if not text.startswith("["):
            raise ConversationProblem("is not a JSON list of turns")
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            raise ConversationProblem("is not valid JSON") from None
    return value


def check_conversation(value: Any) -> list[dict[str, Any]]:
    """The turns as a request carries them, or ConversationProblem (one line)."""
    value = decoded(value)
    if not isinstance(value, list) or not value:
        raise ConversationProblem("must be a non-empty JSON list of turns ({role, content})")
    if len(value) > MAX_TURNS:
        raise ConversationProblem(f"has {len(value)} turns: at most {MAX_TURNS}")
    turns, open_calls = [], set()
    for n, raw in enumerate(value, 1):
        turn = _turn(raw, n)
        if turn["role"] == "tool":
            if turn["tool_call_id"] not in open_calls:
                raise ConversationProblem(f"turn {n}: a tool turn must answer a call of the assistant turn before it")
            open_calls.discard(turn["tool_call_id"])
        elif open_calls:
            raise ConversationProblem(f"turn {n}: every call of the assistant turn before it needs its tool turn first")
        else:
            open_calls = {c["id"] for c in turn.get("tool_calls", ())}
        turns.append(turn)
    if open_calls:
        raise ConversationProblem("the last assistant turn's calls have no tool turns answering them")
    return turns


def _turn(raw: Any, n: int) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ConversationProblem(f"turn {n}: must be an object with role and content")
    role = raw.get("role")
    if role not in TURN_ROLES:
        raise ConversationProblem(f"turn {n}: role must be one of {', '.join(TURN_ROLES)}")
    allowed = {"role", "content"} | ({"tool_calls"} if role == "assistant" else set())
    allowed |= {"tool_call_id"} if role == "tool" else set()
    extra = sorted(str(k)[:40] for k in raw if k not in allowed)
    if extra:
        raise ConversationProblem(
            f"turn {n}: unknown field {extra[0]!r}; a {role} turn has {', '.join(sorted(allowed))}"
        )
    content = raw.get("content")
    calls = raw.get("tool_calls")
    if content is None and role == "assistant" and calls:
        turn: dict[str, Any] = {"role": role, "content": None}
    elif not isinstance(content, str):
        raise ConversationProblem(f"turn {n}: content must be text")
    elif len(content) > MAX_TURN_CHARS:
        raise ConversationProblem(f"turn {n}: content is over {MAX_TURN_CHARS:,} characters")
    else:
        turn = {"role": role, "content": content}
    if calls is not None:
        turn["tool_calls"] = _calls(calls, n)
    if role == "tool":
        call_id = raw.get("tool_call_id")
        if not isinstance(call_id, str) or not CALL_ID_RE.fullmatch(call_id):
            raise ConversationProblem(f"turn {n}: tool_call_id must name the call it answers")
        turn["tool_call_id"] = call_id
    return turn


def _calls(calls: Any, n: int) -> list[dict[str, Any]]:
    if not isinstance(calls, list) or not calls or len(calls) > MAX_CALLS_PER_TURN:
        raise ConversationProblem(f"turn {n}: tool_calls must be a list of 1 to {MAX_CALLS_PER_TURN} calls")
    out, ids = [], set()
    for call in calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        if (
            not isinstance(function, Mapping)
            or call.get("type", "function") != "function"
            or not isinstance(call.get("id"), str)
            or not CALL_ID_RE.fullmatch(call["id"])
            or not isinstance(function.get("name"), str)
            or not FUNCTION_RE.fullmatch(function["name"])
        ):
            raise ConversationProblem(
                f"turn {n}: a tool call is {{id, type: function, function: {{name, arguments}}}} with a "
                "function's name (letters, digits, _ and -)"
            )
        if call["id"] in ids:
            raise ConversationProblem(f"turn {n}: two calls have the same id")
        ids.add(call["id"])
        out.append(
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": function["name"], "arguments": _arguments(function.get("arguments"), n)},
            }
        )
    return out


def _arguments(value: Any, n: int) -> str:
    if isinstance(value, Mapping):
        value = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if not isinstance(value, str) or len(value) > MAX_TURN_CHARS:
        raise ConversationProblem(
            f"turn {n}: a call's arguments must be a JSON object or its text, at most {MAX_TURN_CHARS:,} characters"
        )
    return value


def conversation_of(item: Mapping[str, Any], field: str) -> list[dict[str, Any]]:
    """The item's conversation in ``field``, checked, as the request carries it;
    ConversationProblem when it has none, or one that is not a conversation."""
    value = item.get(field) if isinstance(item, Mapping) else None
    if value is None or value == "":
        raise ConversationProblem(f"the item has no conversation in field {field}")
    try:
        return check_conversation(value)
    except ConversationProblem as exc:
        raise ConversationProblem(f"field {field}: {exc}") from None


def last_turns(value: Any, count: int = SHOWN_TURNS) -> list[dict[str, str]] | None:
    """The last ``count`` turns as a report shows them: role and text (a call as
    ``name(arguments)``), each cut at ``SHOWN_CHARS``; None when ``value`` is no conversation."""
    try:
        turns = check_conversation(value)
    except ConversationProblem:
        return None
    shown = []
    for turn in turns[-count:]:
        text = turn.get("content") or ""
        calls = [f"{c['function']['name']}({c['function']['arguments']})" for c in turn.get("tool_calls", ())]
        text = " ".join(p for p in (text, *calls) if p)
        shown.append(
            {"role": turn["role"], "text": text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"}
        )
    return shown
