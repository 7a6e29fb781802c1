"""The mock server's tool calls: a request with ``tools`` is answered with a call, decided
by rules in the system message, so a routing prompt's function and arguments really move
when its rules change::

    - refund: refund*, money back, charged twice       # the classification rules pick the
    - escalate: lawyer, furious, complaint             # function (a declared tool's name),
    - lookup_order: where is, tracking, parcel         # or none: no call, a text answer
    default: none
    - extract order_id: /ORD-[0-9]+/                   # the extraction lines fill the
    - extract amount: /([0-9]+[.][0-9]{2}) EUR/ as number   # arguments the function declares

* The function: the first rule whose keywords are in the conversation's text (the user
  turns, the tool results and earlier calls' arguments), as a label is chosen
  (``policy.py``); ``tool_choice: required`` with no rule matching calls the first tool,
  ``tool_choice`` naming a function calls it, ``none`` answers text.
* The arguments: the extraction lines (``extract.py``) over the same text, those the
  function's ``parameters`` declare (a value not found is left out).
* ``- parallel: yes``: every function whose rule matches is called (unless the request
  says ``parallel_tool_calls: false``).
* Faults, per item (chosen by a hash of the conversation's text, so the same items every
  time): a system line ``- wrong arguments: 20%`` changes one argument of that share of
  the calls (a number times ten, a text with ``-X`` added), ``- no call: 10%`` answers
  text instead, ``- broken arguments: 5%`` sends arguments that are not JSON; the server's
  ``tool_wrong_rate`` / ``tool_skip_rate`` options do the first two for every prompt.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .extract import extraction_rules
from .policy import content_text, decide, parse_rules

SHARE_RE = re.compile(r"^\s*[-*\u2022]\s*(wrong arguments|no call|broken arguments)\s*:\s*([0-9]{1,3})\s*%\s*$", re.I)
PARALLEL_RE = re.compile(r"^\s*[-*\u2022]\s*parallel\s*:\s*yes\s*$", re.IGNORECASE | re.MULTILINE)
NO_CALL = "none"


def tool_answer(request: Mapping[str, Any], wrong_rate: float = 0.0, skip_rate: float = 0.0) -> dict | str | None:
    """The answer to a request with tools: a message with tool calls, a text (no call), or
    None when the request has no tools (the other rules answer it)."""
    tools = _tools(request)
    if not tools or request.get("tool_choice") == "none":
        return None
    messages = request["messages"]
    system = "\n".join(content_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer"))
    text = conversation_text(messages)
    shares = {"wrong arguments": wrong_rate * 100, "no call": skip_rate * 100, "broken arguments": 0.0}
    for line in system.splitlines():
        found = SHARE_RE.match(line)
        if found:
            shares[found.group(1).lower()] = float(found.group(2))
    functions = _chosen(request, tools, system, text)
    if not functions or _drawn(text, "no call", shares["no call"]):
        return decide(messages)[0]
    extracted = {rule.name: rule.value(text) for rule in extraction_rules(system)}
    calls = []
    for n, name in enumerate(functions):
        arguments = {k: v for k, v in extracted.items() if v is not None and k in tools[name]}
        if arguments and _drawn(f"{text}\x00{n}", "wrong arguments", shares["wrong arguments"]):
            key = sorted(arguments)[0]
            arguments[key] = _wrong(arguments[key])
        body = json.dumps(arguments, ensure_ascii=False)
        if _drawn(f"{text}\x00{n}", "broken arguments", shares["broken arguments"]):
            body = body[:-1]
        calls.append({"id": f"call_{n + 1}", "type": "function", "function": {"name": name, "arguments": body}})
    return {"role": "assistant", "content": None, "tool_calls": calls, "refusal": None}


def _tools(request: Mapping[str, Any]) -> dict[str, set[str]]:
    """The declared functions and the arguments each declares."""
    out = {}
    for tool in request.get("tools") or ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            properties = ((function.get("parameters") or {}).get("properties")) or {}
            out[function["name"]] = set(properties) if isinstance(properties, dict) else set()
    return out


def conversation_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """What the rules read: the user turns, the tool results and earlier calls' arguments."""
    parts = []
    for m in messages:
        if m.get("role") in ("user", "tool"):
            parts.append(content_text(m.get("content")))
        for call in m.get("tool_calls") or ():
            parts.append(str(((call or {}).get("function") or {}).get("arguments") or ""))
    return "\n".join(parts)


def _chosen(request: Mapping[str, Any], tools: dict[str, set[str]], system: str, text: str) -> list[str]:
    choice = request.get("tool_choice")
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        return [name] if name in tools else []
    policy = parse_rules(system)
    if PARALLEL_RE.search(system) and request.get("parallel_tool_calls") is not False:
        matched = list(dict.fromkeys(r.label for r in policy.rules if r.pattern.search(text) and r.label in tools))
        if matched:
            return matched
    label = policy.answer(text)
    if label in tools:
        return [label]
    return [next(iter(tools))] if choice == "required" else []


def _drawn(text: str, fault: str, percent: float) -> bool:
    if percent <= 0:
        return False
    digest = hashlib.sha256(f"{fault}\x00{text}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 10000 < percent * 100


def _wrong(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 10 if value else 1
    return f"{value}-X"
