"""A prompt's tools: the OpenAI function tools the model may call (``tools``), which one it
must call (``tool_choice``) and whether it may call several at once
(``parallel_tool_calls``), parsed and bounded as everything a pull request sends, and sent
as the request's own fields (``request_fields``: the body ``gate.prompt.spec.request_kwargs``
builds, so the request key, the executor and production all see the same tools)::

    tools:
      - name: refund                       # or OpenAI's form: {type: function, function: {...}}
        description: Refund an order.
        parameters:                        # a JSON Schema (gate.prompt.json_schema)
          type: object
          properties: {order_id: {type: string}, amount: {type: number}}
          required: [order_id, amount]
    tool_choice: auto                      # none, required, or {type: function, function: {name: refund}}
    parallel_tool_calls: false

A decision read from the call (``decision: {type: tool_call}``) has labels: the declared
functions and ``none`` (no call), unless the file lists them (``call_labels``); with
``fields`` it compares the call's arguments too (``parse_call_rule``: the arguments'
comparators, and ``function``, the field of the called function, which the gate adds).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gate.errors import SpecError

from .json_schema import check_schema
from .structured.rule import FUNCTION_FIELD, MAX_FIELDS, NO_CALL, CallRule, FieldSpec, parse_fields

TOOL_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")  # fullmatch; OpenAI's rule for a function's name
MAX_TOOLS = 32
MAX_TOOL_DESCRIPTION = 4000
MAX_TOOLS_BYTES = 64 * 1024  # every tool as JSON, together
TOOL_CHOICES = ("auto", "none", "required")
CALL_SEPARATOR = "+"  # several functions called at once: their names in name order, joined


@dataclass(frozen=True)
class Tool:
    name: str
    description: str | None = None
    parameters_json: str | None = None  # the parameters' JSON Schema, as canonical JSON
    strict: bool | None = None

    @property
    def parameters(self) -> dict | None:
        return None if self.parameters_json is None else json.loads(self.parameters_json)

    def to_dict(self) -> dict[str, Any]:
        """The tool as OpenAI's API takes it (and as the prompt's config stores it)."""
        function: dict[str, Any] = {"name": self.name}
        if self.description is not None:
            function["description"] = self.description
        if self.parameters_json is not None:
            function["parameters"] = self.parameters
        if self.strict is not None:
            function["strict"] = self.strict
        return {"type": "function", "function": function}


def parse_tools(value: Any, file: str | None) -> tuple[Tool, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not value:
        raise SpecError(file, "tools", "must be a non-empty list of function tools")
    if len(value) > MAX_TOOLS:
        raise SpecError(file, "tools", f"declares {len(value)} tools: at most {MAX_TOOLS}")
    try:
        size = len(json.dumps(value, allow_nan=False).encode())
    except (TypeError, ValueError, RecursionError):
        raise SpecError(file, "tools", "must hold only JSON values (no NaN, mappings with string keys)") from None
    if size > MAX_TOOLS_BYTES:
        raise SpecError(file, "tools", f"are {size:,} bytes as JSON: at most {MAX_TOOLS_BYTES // 1024} KiB together")
    tools, seen = [], set()
    for i, entry in enumerate(value):
        tool = _parse_tool(entry, f"tools[{i}]", file)
        if tool.name in seen:
            raise SpecError(file, f"tools[{i}].name", f"{tool.name!r} is declared twice")
        seen.add(tool.name)
        tools.append(tool)
    return tuple(tools)


def _parse_tool(entry: Any, where: str, file: str | None) -> Tool:
    if isinstance(entry, Mapping) and "function" in entry:  # OpenAI's form
        extra = [k for k in entry if k not in ("type", "function")]
        if extra or entry.get("type") != "function":
            raise SpecError(
                file, where, "an OpenAI tool is {type: function, function: {name, description, parameters}}"
            )
        entry = entry["function"]
    if not isinstance(entry, Mapping):
        raise SpecError(file, where, "must be a function tool: {name, description, parameters}")
    extra = [k for k in entry if k not in ("name", "description", "parameters", "strict")]
    if extra:
        raise SpecError(
            file, f"{where}.{str(extra[0])[:40]}", "unknown field; a tool has name, description, parameters, strict"
        )
    name = entry.get("name")
    if not isinstance(name, str) or not TOOL_NAME_RE.fullmatch(name):
        raise SpecError(
            file, f"{where}.name", "must be a function name: letters, digits, _ and -, at most 64 characters"
        )
    if name.casefold() == NO_CALL:
        raise SpecError(
            file, f"{where}.name", f"{name!r} is reserved: a decision reads '{NO_CALL}' when no function is called"
        )
    description = entry.get("description")
    if description is not None and (not isinstance(description, str) or len(description) > MAX_TOOL_DESCRIPTION):
        raise SpecError(file, f"{where}.description", f"must be a string of at most {MAX_TOOL_DESCRIPTION} characters")
    strict = entry.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise SpecError(file, f"{where}.strict", "must be true or false")
    parameters = entry.get("parameters")
    if parameters is not None:
        parameters = check_schema(parameters, f"{where}.parameters", file)
        if parameters.get("type") != "object":
            raise SpecError(
                file, f"{where}.parameters.type", "must be object: a function's arguments are a JSON object"
            )
        parameters = json.dumps(parameters, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return Tool(name, description, parameters, strict)


def parse_tool_choice(value: Any, tools: tuple[Tool, ...], file: str | None) -> Any:
    """``auto``, ``none``, ``required``, or one declared function in OpenAI's form."""
    if value is None:
        return None
    if not tools:
        raise SpecError(file, "tool_choice", "goes with tools")
    if isinstance(value, str):
        if value not in TOOL_CHOICES:
            raise SpecError(
                file,
                "tool_choice",
                f"must be one of {', '.join(TOOL_CHOICES)}, or {{type: function, function: {{name: ...}}}}",
            )
        return value
    function = value.get("function") if isinstance(value, Mapping) else None
    if (
        not isinstance(function, Mapping)
        or set(value) != {"type", "function"}
        or value.get("type") != "function"
        or set(function) != {"name"}
    ):
        raise SpecError(
            file, "tool_choice", "one function is chosen as {type: function, function: {name: <a declared tool>}}"
        )
    if function["name"] not in {t.name for t in tools}:
        raise SpecError(file, "tool_choice", f"{str(function['name'])[:64]!r} is not one of the declared tools")
    return {"type": "function", "function": {"name": function["name"]}}


def parse_parallel(value: Any, tools: tuple[Tool, ...], file: str | None) -> bool | None:
    if value is None:
        return None
    if not tools:
        raise SpecError(file, "parallel_tool_calls", "goes with tools")
    if not isinstance(value, bool):
        raise SpecError(file, "parallel_tool_calls", "must be true or false")
    return value


def function_names(tools: tuple[Tool, ...]) -> tuple[str, ...]:
    return tuple(t.name for t in tools)


def call_labels(value: Any, tools: tuple[Tool, ...], file: str | None) -> tuple[str, ...]:
    """The labels of a decision read from the call: the declared functions and ``none``,
    or the file's own list, each a declared function, ``none``, or several functions
    called at once (``lookup_order+refund``: their names in name order)."""
    names = function_names(tools)
    if value is None:
        return names + (NO_CALL,)
    if not isinstance(value, list) or len(value) < 2:
        raise SpecError(file, "labels", "must be a list of two or more labels")
    for label in value:
        parts = label.split(CALL_SEPARATOR) if isinstance(label, str) else None
        if label == NO_CALL:
            continue
        if (
            parts is None
            or any(p not in names for p in parts)
            or parts != sorted(parts)
            or len(set(parts)) != len(parts)
        ):
            raise SpecError(
                file,
                "labels",
                f"{str(label)[:64]!r} is not a label of a tool_call decision: a declared function, "
                f"'{NO_CALL}', or several functions joined by '{CALL_SEPARATOR}' in name order",
            )
    if len(set(value)) != len(value):
        raise SpecError(file, "labels", "lists a label twice")
    return tuple(value)


def parse_call_rule(value: Any, tools: tuple[Tool, ...], file: str | None) -> CallRule:
    """The ``fields`` of a decision read from the call: the arguments' comparators (as a
    fields decision's), and ``function``, the called function's field, added by the gate
    (the declared functions and ``none``, or several joined by ``+``)."""
    derived = FieldSpec(FUNCTION_FIELD, "label", labels=function_names(tools) + (NO_CALL,))
    if isinstance(value, Mapping) and FUNCTION_FIELD in value:
        given = parse_fields({FUNCTION_FIELD: value[FUNCTION_FIELD]}, file).fields[0]
        if given != derived:
            raise SpecError(
                file,
                f"decision.fields.{FUNCTION_FIELD}",
                "is the called function, which the gate reads itself from the tools: leave it out",
            )
        value = {k: v for k, v in value.items() if k != FUNCTION_FIELD}
    rule = parse_fields(value, file)
    if len(rule.fields) >= MAX_FIELDS:
        raise SpecError(file, "decision.fields", f"declares {len(rule.fields)} arguments: at most {MAX_FIELDS - 1}")
    return CallRule(tuple(sorted(rule.fields + (derived,), key=lambda f: f.name)))


def request_fields(tools: tuple[Tool, ...], tool_choice: Any, parallel: bool | None) -> dict[str, Any]:
    """What the request body carries of the tools (nothing without tools)."""
    if not tools:
        return {}
    out: dict[str, Any] = {"tools": [t.to_dict() for t in tools]}
    if isinstance(tool_choice, str):
        out["tool_choice"] = tool_choice
    elif tool_choice is not None:  # one function, in OpenAI's form (a frozen spec's mapping, rebuilt)
        out["tool_choice"] = {"type": "function", "function": {"name": tool_choice["function"]["name"]}}
    if parallel is not None:
        out["parallel_tool_calls"] = parallel
    return out
