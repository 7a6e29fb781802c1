"""A dataset row's expected tool call, for prompts decided by the call (``decision:
{type: tool_call}``, ``gate.prompt.tool_decision``).

A row names the expected function in its label column (``expected_decision``: a function,
or ``none`` for no call) and the expected arguments as a fields decision's expected object
(``gate.prompt.structured.expected``): an ``expected`` column holding an object (JSONL) or
``expected.<argument>`` columns (CSV). A row that expects several calls at once gives them
as a list in its ``expected`` column (in a CSV cell, as JSON text), its label column empty::

    {"item_id": "c-7", "messages": [...],
     "expected": [{"function": "lookup_order", "arguments": {"order_id": "A-1"}},
                  {"function": "escalate", "arguments": {"reason": "legal threat"}}]}

What the row stores as its expected value: the label alone when it gives no argument (a
call row with empty ``expected.<argument>`` cells too), else canonical JSON,
``{"function": "refund", "amount": 12.5, ...}`` or ``{"calls": [...], "function":
"escalate+lookup_order"}``, the form an answer is read in. Each argument is checked as an
expected object's field is (a name the gate can address, a value a comparator compares);
``function`` is the call's, never an argument's.

The import summarises a version's calls (``CallsSummary``, stored as
``dataset_version.fields["calls"]``): rows per expected function and, per argument, the
values' kinds (``summary.FieldStats``). At submit (``check_call_rows``) a decision is held
against it, in one line that quotes no row's value: a decision by label refuses rows that
give arguments (they would be ignored), a decision with fields needs rows that expect each
declared argument, values its comparator reads, and functions among the declared ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from gate.errors import DatasetError

from .expected import EXPECTED_COLUMN, checked_expected, expected_object
from .rule import FUNCTION_FIELD, NO_CALL, CallRule, FieldsRule, canonical
from .summary import FieldStats, RuleMisfit, check_rule, unreadable

MAX_EXPECTED_CALLS = 8
FUNCTION_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
CALLS_KEY = "calls"
SEPARATOR = "+"


def expected_calls(record: Mapping[str, Any], label: str, where: str) -> tuple[str, tuple[str, ...]] | None:
    """(the row's expected value, the columns it was read from) when the row gives an
    expected call with arguments or several calls; None when it gives neither (a label, or
    an expected object with no label: a fields decision's row)."""
    whole = record.get(EXPECTED_COLUMN)
    if isinstance(whole, str) and whole.strip().startswith("["):
        try:
            whole = json.loads(whole)
        except (ValueError, RecursionError):
            raise DatasetError(f"{where}: the expected calls are not valid JSON") from None
    if isinstance(whole, list):
        if label:
            raise DatasetError(f"{where}: gives both a label and a list of expected calls: leave the label empty")
        return _several(whole, where), (EXPECTED_COLUMN,)
    if not label:
        return None
    arguments, columns = expected_object(record)
    if not columns:
        return None
    if not arguments:  # empty expected.<argument> cells: the call of a function with nothing to compare
        return label, columns
    return canonical(_call(label, arguments, where)), columns


def _call(function: Any, arguments: Mapping[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(function, str) or not FUNCTION_RE.fullmatch(function):
        raise DatasetError(f"{where}: the expected function is not a function's name (letters, digits, _ and -)")
    if function == NO_CALL and arguments:
        raise DatasetError(f"{where}: expects no call ({NO_CALL}) but gives arguments")
    if FUNCTION_FIELD in arguments:
        raise DatasetError(f"{where}: {FUNCTION_FIELD} is the called function, not an argument")
    if not arguments:
        return {FUNCTION_FIELD: function}
    return {FUNCTION_FIELD: function, **json.loads(checked_expected(dict(arguments), where))}


def _several(calls: list, where: str) -> str:
    if not 2 <= len(calls) <= MAX_EXPECTED_CALLS:
        raise DatasetError(f"{where}: a list of expected calls has 2 to {MAX_EXPECTED_CALLS} calls")
    made = []
    for n, call in enumerate(calls, 1):
        if not isinstance(call, Mapping) or set(call) - {"function", "arguments"} or "function" not in call:
            raise DatasetError(f"{where}: expected call {n} is not {{function, arguments}}")
        arguments = call.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            raise DatasetError(f"{where}: expected call {n}: arguments must be an object")
        made.append(_call(call["function"], arguments, f"{where}: expected call {n}"))
    names = SEPARATOR.join(sorted(c[FUNCTION_FIELD] for c in made))
    return canonical({CALLS_KEY: sorted(made, key=canonical), FUNCTION_FIELD: names})


def function_of(expected: str) -> str:
    """The function (or functions, joined) a row's stored expected value names."""
    if not expected.startswith("{"):
        return expected
    try:
        value = json.loads(expected).get(FUNCTION_FIELD)
    except (ValueError, AttributeError):
        return expected
    return value if isinstance(value, str) else expected


class CallsSummary:
    """A version's expected calls, row by row (the module docstring); ``to_json`` is None
    when no row gives arguments."""

    def __init__(self) -> None:
        self.with_arguments = 0
        self.functions: dict[str, int] = {}
        self.fields: dict[str, FieldStats] = {}

    def add(self, position: str, expected: str, call: bool, where: str) -> None:
        function = function_of(expected) if call else expected
        if len(self.functions) < 256 or function in self.functions:
            self.functions[function] = self.functions.get(function, 0) + 1
        if not call:
            return
        self.with_arguments += 1
        obj = json.loads(expected)
        for one in obj.get(CALLS_KEY) or [obj]:
            for name, value in one.items():
                if name == FUNCTION_FIELD:
                    continue
                problem = self.fields.setdefault(name, FieldStats()).add(value, position)
                if problem:
                    raise DatasetError(f"{where}: expected argument {name} {problem}")

    def to_json(self) -> dict[str, Any] | None:
        if not self.with_arguments:
            return None
        return {
            "rows": self.with_arguments,
            "functions": dict(sorted(self.functions.items())),
            "fields": {name: stats.to_json() for name, stats in sorted(self.fields.items())},
        }


def calls_summary(version_fields: Mapping[str, Any] | None) -> dict | None:
    return (version_fields or {}).get("calls")


def check_fields_rows(rule: FieldsRule | None, version_fields: Mapping[str, Any] | None, dataset: str) -> None:
    """Refuse (RuleMisfit, one line; its ``withheld`` names only the dataset) a decision by
    label (``rule`` None) or field by field that cannot read this version's expected values
    (``summary.check_rule``); the kinds call it (``gate.kinds``)."""
    if rule is None and calls_summary(version_fields) is not None:
        raise RuleMisfit(
            f"dataset {dataset} gives expected arguments of tool calls: decide them field by field "
            "(decision: {type: tool_call, fields: {...}}), or use a dataset of labels",
            dataset,
        )
    check_rule(rule, version_fields, dataset)


def check_call_rows(rule: CallRule, version_fields: Mapping[str, Any] | None, dataset: str) -> None:
    """Refuse (RuleMisfit, as ``check_fields_rows``) a tool call's decision with fields that
    cannot read this version's expected calls (the module docstring)."""
    calls = calls_summary(version_fields)
    if calls is None:
        raise RuleMisfit(
            f"dataset {dataset} gives no expected arguments: a tool_call decision with fields needs rows "
            "with an expected object (JSONL) or expected.<argument> columns (CSV)",
            dataset,
        )
    _check_functions(rule, calls, dataset)
    have = calls.get("fields") or {}
    for spec in rule.fields:
        if spec.name == FUNCTION_FIELD:
            continue
        if spec.name not in have:
            given = ", ".join(sorted(have)) or "none"
            raise RuleMisfit(f"dataset {dataset}: no row expects argument {spec.name} (they give {given})", dataset)
        problem = unreadable(spec, have[spec.name])
        if problem:
            raise RuleMisfit(f"dataset {dataset}: argument {spec.name} ({spec.type}): {problem}", dataset)


def _check_functions(rule: CallRule, calls: Mapping[str, Any], dataset: str) -> None:
    known = set(rule.functions) | {NO_CALL}
    functions = calls.get("functions") or {}
    unknown = [f for f in functions if any(part not in known for part in f.split(SEPARATOR))]
    if unknown:
        rows = sum(int(functions[f]) for f in unknown)
        raise RuleMisfit(
            f"dataset {dataset}: {rows:,} row(s) expect one of {len(unknown):,} function(s) the prompt does not "
            f"declare (its tools: {', '.join(rule.functions)})",
            dataset,
        )
