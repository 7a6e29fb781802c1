"""A decision read from the model's tool calls (``decision: {type: tool_call}``), and how
it is held against an item's expected call.

**Reading.** An answer's calls (``message.tool_calls``: at most ``MAX_CALLS`` are read,
each call's arguments a JSON text of at most ``MAX_ANSWER_CHARS``) become ``ToolCall``\\ s:
the function's name, the arguments parsed, and a problem when they are not a JSON object
(``not JSON``) or do not fit the function's declared ``parameters``
(``off schema: <where>: <what>``, checked by ``gate.prompt.json_schema``, bounded). Then:

* **by label** (no ``fields``): the label is the called function's name, ``none`` when the
  model called none, the names in name order joined by ``+`` when it called several
  functions, and ``(invalid)`` when that is none of the labels (an undeclared function).
  A call whose arguments are not JSON reads ``(arguments not JSON)``, one off its schema
  ``(arguments off schema)``: MISMATCH, marked so, never an error.
* **field by field** (``fields``, a ``CallRule``): the answer is kept as canonical JSON,
  ``{"function": "refund", "amount": 12.5, "order_id": "A-1"}`` (the declared arguments
  present in the call, each as ``structured.reading.kept`` keeps a value),
  ``{"function": "none"}`` with no call, and with several calls ``{"calls": [...],
  "function": "lookup_order+refund"}`` (every call's name, duplicates too, in name order).
  A problem with the arguments is kept as ``"(arguments)": "not JSON"`` or ``"off schema:
  ..."``: the item is a MISMATCH whatever its fields.

**Judging** (``score_calls``). The expected call is the row's (``structured.expected_calls``):
a plain label (``none``, a function with no arguments to check) or the same canonical
form. ``function`` matches when the called functions are the same (several: the same
multiset). The expected calls are paired with the answer's, by function, then by
arguments (a call whose compared arguments all match is preferred), and an argument is
compared on the items whose expected call has it: wrong when the paired call lacks it
(missing too) or its comparator (``structured.compare.field_matches``) says no. The masks
are those of a fields decision (bit *i*: the *i*-th field in name order), with one more
state: an argument that the expected call does not have is **not compared**, kept as its
``missing`` bit without its ``wrong`` bit (a fields decision never writes that pair), so the
figures count each argument over the items that expect it (``gate.store.tool_calls``).
The item is a MATCH when every bit of ``wrong`` is clear and no problem was marked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gate.untrusted import storable

from .decision import MAX_ANSWER_CHARS
from .json_schema import answer_problem
from .structured.compare import Outcome, field_matches
from .structured.reading import MAX_READ_CHARS, MAX_VALUE_DEPTH, kept, nesting, parse_read
from .structured.rule import FUNCTION_FIELD, NO_CALL, CallRule, canonical
from .tools import CALL_SEPARATOR, Tool

MAX_CALLS = 8  # calls of one answer that are read
MAX_NAME_CHARS = 64
PROBLEM_KEY = "(arguments)"
NOT_JSON = "not JSON"
OFF_SCHEMA = "off schema"
LABEL_NOT_JSON = "(arguments not JSON)"
LABEL_OFF_SCHEMA = "(arguments off schema)"
TOO_MANY = f"more than {MAX_CALLS} calls"
CALLS_KEY = "calls"


@dataclass(frozen=True)
class ToolCall:
    """One call of an answer: what production gets (``gate.runtime``) and what is judged."""

    name: str
    arguments: dict | None  # parsed; None when they were not a JSON object
    problem: str | None = None  # not JSON / off schema: ... / None

    def shown(self) -> str:
        """``name(arguments)`` as a report shows it."""
        args = "…" if self.arguments is None else json.dumps(self.arguments, ensure_ascii=False, sort_keys=True)
        return f"{self.name}({args})"


def read_calls(message: Mapping[str, Any], tools: Sequence[Tool]) -> tuple[tuple[ToolCall, ...], bool]:
    """The answer's calls (at most ``MAX_CALLS``) and whether it made more."""
    raw = message.get("tool_calls")
    if not isinstance(raw, list):
        return (), False
    declared = {t.name: t for t in tools}
    calls = tuple(_read_call(entry, declared) for entry in raw[:MAX_CALLS])
    return calls, len(raw) > MAX_CALLS


def _read_call(entry: Any, declared: Mapping[str, Tool]) -> ToolCall:
    function = entry.get("function") if isinstance(entry, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    name = storable(name[:MAX_NAME_CHARS]) if isinstance(name, str) and name else "(no name)"
    text = function.get("arguments") if isinstance(function, Mapping) else None
    if isinstance(text, Mapping):  # a provider that sends the object itself
        text = json.dumps(text)
    arguments = _parsed(text)
    if arguments is None:
        return ToolCall(name, None, NOT_JSON)
    tool = declared.get(name)
    schema = tool.parameters if tool is not None else None
    problem = answer_problem(schema, arguments) if schema is not None else None
    return ToolCall(name, arguments, f"{OFF_SCHEMA}: {problem}" if problem else None)


def _parsed(text: Any) -> dict | None:
    if not isinstance(text, str) or len(text) > MAX_ANSWER_CHARS:
        return None
    try:
        value = json.loads(text or "{}")
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or nesting(json.dumps(value)) > MAX_VALUE_DEPTH + 1:
        return None
    return value


def call_label(calls: Sequence[ToolCall], labels: Sequence[str], too_many: bool) -> str | None:
    """The label a decision by label reads from the calls (a marker when the arguments
    failed; None: no label, the caller's ``(invalid)``)."""
    if any(c.problem == NOT_JSON for c in calls):
        return LABEL_NOT_JSON
    if any(c.problem for c in calls):
        return LABEL_OFF_SCHEMA
    if too_many:
        return None
    label = CALL_SEPARATOR.join(sorted({c.name for c in calls})) or NO_CALL
    return label if label in labels else None


def call_reading(rule: CallRule, calls: Sequence[ToolCall], too_many: bool) -> str:
    """A decision field by field: the calls as canonical JSON (the module docstring)."""
    kept_calls = [_kept_call(rule, c) for c in calls]
    problems = [c.problem for c in calls if c.problem]
    if too_many:
        problems.insert(0, TOO_MANY)
    names = sorted(c.name for c in calls)
    if len(kept_calls) > 1:
        out: dict[str, Any] = {CALLS_KEY: sorted(kept_calls, key=canonical), FUNCTION_FIELD: CALL_SEPARATOR.join(names)}
    else:
        out = kept_calls[0] if kept_calls else {FUNCTION_FIELD: NO_CALL}
    if problems:
        out[PROBLEM_KEY] = problems[0]
    text = canonical(out)
    if len(text) > MAX_READ_CHARS:
        return canonical({PROBLEM_KEY: "too long to keep", FUNCTION_FIELD: CALL_SEPARATOR.join(names)[:1000]})
    return text


def _kept_call(rule: CallRule, call: ToolCall) -> dict[str, Any]:
    out: dict[str, Any] = {FUNCTION_FIELD: call.name}
    for spec in rule.fields:
        if spec.name != FUNCTION_FIELD and call.arguments is not None and spec.name in call.arguments:
            out[spec.name] = kept(call.arguments[spec.name])
    return out


# --- judging --------------------------------------------------------------------------------


def expected_object(expected: str) -> dict:
    """An item's expected call as an object: a plain label is a call with nothing to compare."""
    found = parse_read(expected) if expected.startswith("{") else None
    return found if found is not None else {FUNCTION_FIELD: expected}


def calls_of(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The calls of a kept (or expected) object, each with its function and arguments."""
    if isinstance(obj.get(CALLS_KEY), list):
        return [c for c in obj[CALLS_KEY] if isinstance(c, dict)]
    if obj.get(FUNCTION_FIELD) in (None, NO_CALL):
        return []
    return [{k: v for k, v in obj.items() if not k.startswith("(")}]


def score_calls(rule: CallRule, actual: str | None, expected: str) -> Outcome:
    """An item's answer against its expected call (the module docstring)."""
    read = parse_read(actual)
    if read is None:
        return Outcome(False, rule.all_bits, rule.all_bits)
    wanted = expected_object(expected)
    wrong = missing = 0
    if read.get(FUNCTION_FIELD) != wanted.get(FUNCTION_FIELD):
        wrong |= rule.bit(FUNCTION_FIELD)
    pairs = _pairs(rule, calls_of(wanted), calls_of(read))
    for i, spec in enumerate(rule.fields):
        if spec.name == FUNCTION_FIELD:
            continue
        compared = [(e, a) for e, a in pairs if spec.name in e]
        if not compared:
            missing |= 1 << i  # not compared: missing without wrong
        for e, a in compared:
            if a is None or spec.name not in a:
                wrong, missing = wrong | 1 << i, missing | 1 << i
            elif not field_matches(spec, a[spec.name], e[spec.name]):
                wrong |= 1 << i
    return Outcome(wrong == 0 and PROBLEM_KEY not in read, wrong, missing)


def _pairs(rule: CallRule, expected: list[dict], answered: list[dict]) -> list[tuple[dict, dict | None]]:
    """Each expected call with the answer's call it is held against (None: none left of its
    function): one whose compared arguments all match, else the first of its function."""
    left = list(answered)
    pairs = []
    for want in expected:
        same = [a for a in left if a.get(FUNCTION_FIELD) == want.get(FUNCTION_FIELD)]
        best = next((a for a in same if _all_match(rule, want, a)), same[0] if same else None)
        if best is not None:
            left.remove(best)
        pairs.append((want, best))
    return pairs


def _all_match(rule: CallRule, want: dict, got: dict) -> bool:
    return all(
        spec.name in got and field_matches(spec, got[spec.name], want[spec.name])
        for spec in rule.fields
        if spec.name != FUNCTION_FIELD and spec.name in want
    )


def wrong_calls(rule: CallRule, actual: str | None, expected: str) -> list[dict[str, Any]]:
    """The function and the compared arguments an item got wrong, as a report lists a
    fields decision's (``expected``, ``actual``: None when missing; ``sent_to``: the function
    an argument was sent to instead, when the expected function was not called), the problem
    first."""
    read = parse_read(actual) or {}
    outcome = score_calls(rule, actual, expected)
    wanted = expected_object(expected)
    out = []
    if PROBLEM_KEY in read:
        out.append({"field": PROBLEM_KEY, "expected": None, "actual": read[PROBLEM_KEY], "missing": False})
    pairs = _pairs(rule, calls_of(wanted), calls_of(read))
    for i, spec in enumerate(rule.fields):
        if not outcome.wrong & 1 << i:
            continue
        if spec.name == FUNCTION_FIELD:
            out.append(
                {"field": spec.name, "expected": wanted.get(spec.name), "actual": read.get(spec.name), "missing": False}
            )
            continue
        for want, got in pairs:
            if spec.name in want and (
                got is None or spec.name not in got or not field_matches(spec, got[spec.name], want[spec.name])
            ):
                value = None if got is None else got.get(spec.name)
                wrong = {"field": spec.name, "expected": want[spec.name], "actual": value, "missing": value is None}
                if got is None:  # no call of its function: the argument may have gone to another one
                    other = next((c for c in calls_of(read) if spec.name in c), None)
                    if other is not None:
                        wrong["sent_to"] = str(other.get(FUNCTION_FIELD))
                out.append(wrong)
                break
    return out


def shown_calls(obj: Mapping[str, Any]) -> str:
    """A kept or expected call (or calls) as ``name(arg=value, ...)``; ``none``."""
    calls = calls_of(obj)
    if not calls:
        return NO_CALL
    parts = []
    for call in calls:
        args = ", ".join(
            f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in sorted(call.items()) if k != FUNCTION_FIELD
        )
        parts.append(f"{call.get(FUNCTION_FIELD)}({args})")
    return " + ".join(parts)
