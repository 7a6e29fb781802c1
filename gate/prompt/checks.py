"""Deterministic checks of a generative answer: ``decision: {type: checks, checks: {NAME:
{OP: ARG}}}`` (``gate.kinds.checks``), or checks before a judge (``decision: {type: judge,
..., checks: {...}}``: an item failing one is a MISMATCH without a judge call).

Each named check reads the answer and the item, one operation each:

* ``contains`` / ``not_contains`` / ``icontains`` / ``not_icontains`` / ``starts_with`` /
  ``not_starts_with`` / ``equals`` / ``not_equals`` (both trimmed): a literal string, or
  ``{column: NAME}`` for the item's column (a missing column fails the check: nothing was
  compared);
* ``regex`` / ``not_regex``: an RE2 pattern (``gate.prompt.linear_regex``: linear, bounded);
* ``max_words`` / ``max_chars``: a whole number;
* ``is_json: true`` (the whole answer is JSON), ``contains_json: true`` (the answer holds
  JSON: whole, fenced, or one ``{...}`` amid text);
* ``json_equals: {path: a.b, value: V}``: the JSON the answer holds has ``V`` at the dotted
  path (``value`` may be ``{column: NAME}``).

The rule comes from a pull request and the answer from a model: a check spec is validated
field by field (one line per problem), the answer read is bounded (``MAX_CHECKED_CHARS``),
patterns run on RE2 and JSON nested beyond the decoder is not JSON. An item passes when
every check passes; which failed is a bit mask (bit *i*: the *i*-th check in name order),
kept with the item as a fields decision keeps its wrong fields.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gate.errors import SpecError

from .decision import answer_json
from .linear_regex import PatternError, compile_pattern

MAX_CHECKS = 32
MAX_CHECKED_CHARS = 32 * 1024
MAX_LITERAL_CHARS = 1000
MAX_COUNT = 10**6
CHECK_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
COLUMN_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}")
TEXT_OPS = (
    "contains",
    "not_contains",
    "icontains",
    "not_icontains",
    "starts_with",
    "not_starts_with",
    "equals",
    "not_equals",
)
PATTERN_OPS = ("regex", "not_regex")
COUNT_OPS = ("max_words", "max_chars")
FLAG_OPS = ("is_json", "contains_json")
OPS = (*TEXT_OPS, *PATTERN_OPS, *COUNT_OPS, *FLAG_OPS, "json_equals")


@dataclass(frozen=True)
class Operand:
    """A literal, or the item's column ``column``."""

    literal: Any = None
    column: str | None = None

    def value(self, item: Mapping[str, Any] | None) -> Any:
        if self.column is None:
            return self.literal
        return (item or {}).get(self.column)

    def to_json(self) -> Any:
        return {"column": self.column} if self.column is not None else self.literal


@dataclass(frozen=True)
class Check:
    name: str
    op: str
    arg: Any  # an Operand (text ops, json_equals' value), a pattern, a count, True

    path: str | None = None  # json_equals

    def to_dict(self) -> dict[str, Any]:
        if self.op == "json_equals":
            return {"json_equals": {"path": self.path, "value": self.arg.to_json()}}
        return {self.op: self.arg.to_json() if isinstance(self.arg, Operand) else self.arg}


@dataclass(frozen=True)
class ChecksRule:
    checks: tuple[Check, ...]  # in name order: check i is bit i of a failed mask

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {c.name: c.to_dict() for c in self.checks}

    @property
    def columns(self) -> tuple[str, ...]:
        """The item columns the checks read (a submission is refused when no row has one)."""
        found = {c.arg.column for c in self.checks if isinstance(c.arg, Operand) and c.arg.column is not None}
        return tuple(sorted(found))

    def failed(self, answer: str | None, item: Mapping[str, Any] | None) -> int:
        """The mask of the checks ``answer`` fails on ``item`` (0: every check passes)."""
        text = (answer or "")[:MAX_CHECKED_CHARS]
        mask = 0
        for bit, check in enumerate(self.checks):
            if not passes(check, text, item):
                mask |= 1 << bit
        return mask

    def failed_names(self, mask: int) -> list[str]:
        return [c.name for bit, c in enumerate(self.checks) if mask & (1 << bit)]


def passes(check: Check, text: str, item: Mapping[str, Any] | None) -> bool:
    """Whether ``text`` passes one check on ``item``."""
    op = check.op
    if op in TEXT_OPS:
        wanted = check.arg.value(item)
        return wanted is not None and _text_op(op, text, _as_text(wanted))
    if op in PATTERN_OPS:
        found = compile_pattern(check.arg).search(text) is not None
        return found if op == "regex" else not found
    if op == "max_words":
        return len(text.split()) <= check.arg
    if op == "max_chars":
        return len(text) <= check.arg
    if op == "is_json":
        return _strict_json(text)[0]
    if op == "contains_json":
        return answer_json(text)[0]
    return _json_equals(check, text, item)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value) if isinstance(value, (bool, int, float)) else str(value)


def _text_op(op: str, text: str, wanted: str) -> bool:
    if op == "contains":
        return wanted in text
    if op == "not_contains":
        return wanted not in text
    if op == "icontains":
        return wanted.casefold() in text.casefold()
    if op == "not_icontains":
        return wanted.casefold() not in text.casefold()
    if op in ("starts_with", "not_starts_with"):
        return text.lstrip().startswith(wanted) == (op == "starts_with")
    return (text.strip() == wanted.strip()) == (op == "equals")  # equals, not_equals


def _strict_json(text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):
        return False, None


def _json_equals(check: Check, text: str, item: Mapping[str, Any] | None) -> bool:
    found, data = answer_json(text)
    if not found:
        return False
    for part in (check.path or "").split("."):
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return False
    wanted = check.arg.value(item)
    if check.arg.column is not None and isinstance(wanted, str) and not isinstance(data, str):
        return _as_text(data) == wanted  # a column's cell is text: compare as text
    return bool(data == wanted and type(data) is type(wanted)) or (
        isinstance(data, (int, float))
        and isinstance(wanted, (int, float))
        and not isinstance(data, bool)
        and data == wanted
    )


# --- parsing (untrusted: one line per problem) -------------------------------------------------


def parse_checks(value: Any, file: str | None, where: str = "decision.checks") -> ChecksRule:
    """``checks: {NAME: {OP: ARG}}``, validated; the checks in name order."""
    if not isinstance(value, Mapping) or not value:
        raise SpecError(file, where, "must map a check's name to one check, e.g. {no_refund: {not_icontains: refund}}")
    if len(value) > MAX_CHECKS:
        raise SpecError(file, where, f"names {len(value)} checks: at most {MAX_CHECKS}")
    checks = []
    for name in sorted(value, key=str):
        if not isinstance(name, str) or not CHECK_NAME_RE.fullmatch(name):
            raise SpecError(file, where, f"{str(name)[:40]!r} is not a check name (letters, digits, _; at most 64)")
        checks.append(parse_check(name, value[name], file, f"{where}.{name}"))
    return ChecksRule(tuple(checks))


def parse_check(name: str, value: Any, file: str | None, where: str) -> Check:
    if not isinstance(value, Mapping) or len(value) != 1:
        raise SpecError(file, where, f"must be one check, e.g. {{contains: text}}; one of {', '.join(OPS)}")
    raw_op, arg = next(iter(value.items()))
    op = str(raw_op).replace("-", "_")
    if op not in OPS:
        raise SpecError(file, f"{where}.{str(raw_op)[:40]}", f"unknown check; one of {', '.join(OPS)}")
    at = f"{where}.{op}"
    if op in TEXT_OPS:
        return Check(name, op, _operand(arg, file, at))
    if op in PATTERN_OPS:
        return Check(name, op, _pattern(arg, file, at))
    if op in COUNT_OPS:
        if isinstance(arg, bool) or not isinstance(arg, int) or not 0 <= arg <= MAX_COUNT:
            raise SpecError(file, at, f"must be a whole number from 0 to {MAX_COUNT}")
        return Check(name, op, arg)
    if op in FLAG_OPS:
        if arg is not True:
            raise SpecError(file, at, "must be true")
        return Check(name, op, True)
    return _json_equals_check(name, arg, file, at)


def _operand(arg: Any, file: str | None, where: str) -> Operand:
    if isinstance(arg, Mapping):
        column = arg.get("column")
        if set(arg) != {"column"} or not isinstance(column, str) or not COLUMN_RE.fullmatch(column):
            raise SpecError(file, where, "must be a text, or {column: NAME} for the item's column")
        return Operand(column=column)
    if isinstance(arg, bool) or not isinstance(arg, (str, int, float)) or not str(arg):
        raise SpecError(file, where, "must be a text, or {column: NAME} for the item's column")
    if len(str(arg)) > MAX_LITERAL_CHARS:
        raise SpecError(file, where, f"longer than {MAX_LITERAL_CHARS} characters")
    return Operand(literal=str(arg))


def _pattern(arg: Any, file: str | None, where: str) -> str:
    if not isinstance(arg, str) or not arg:
        raise SpecError(file, where, "must be a regular expression (RE2 syntax)")
    try:
        compile_pattern(arg)
    except PatternError as exc:
        raise SpecError(file, where, f"invalid regular expression: {exc}") from None
    return arg


def _json_equals_check(name: str, arg: Any, file: str | None, where: str) -> Check:
    if not isinstance(arg, Mapping) or set(arg) != {"path", "value"}:
        raise SpecError(file, where, "must be {path: a.b, value: V}: the value at the answer JSON's dotted path")
    path = arg["path"]
    if not isinstance(path, str) or not path or len(path) > 256:
        raise SpecError(file, f"{where}.path", "must be a dotted path of at most 256 characters, e.g. result.status")
    value = arg["value"]
    if isinstance(value, Mapping):
        return Check(name, "json_equals", _operand(value, file, f"{where}.value"), path=path)
    if not isinstance(value, (str, int, float, bool)) and value is not None:
        raise SpecError(file, f"{where}.value", "must be a string, number, true, false, null, or {column: NAME}")
    if isinstance(value, str) and len(value) > MAX_LITERAL_CHARS:
        raise SpecError(file, f"{where}.value", f"longer than {MAX_LITERAL_CHARS} characters")
    return Check(name, "json_equals", Operand(literal=value), path=path)
