"""The kinds by the decision ``type`` stored (``kind_of``), a run's kind's checks
(``checks_of``), and a ``decision:`` mapping parsed by its kind (``parse_rule``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.errors import SpecError
from gate.prompt.structured.rule import FieldsRule
from gate.prompt.tools import Tool
from gate.verdict.bar_checks import KindChecks

from .base import Decision, DecisionKind, StoredDecision
from .checks import CHECKS
from .compared import COMPARED
from .fields import FIELDS
from .first import FIRST
from .judged import JUDGED
from .label import LABEL, TYPES
from .tool_call import TOOL_CALL

KINDS: dict[str, DecisionKind] = {
    **dict.fromkeys(TYPES, LABEL),
    "fields": FIELDS,
    "judge": JUDGED,
    "tool_call": TOOL_CALL,
    "checks": CHECKS,
}
DECISION_TYPES = (
    "first_word",
    "json",
    "regex",
    "fields",
    "judge",
    "tool_call",
    "checks",
)  # in the order errors name them


def kind_of(decision: Decision | StoredDecision) -> DecisionKind:
    """The kind of a parsed or stored decision (None, or a type this code does not know:
    the default, one label by its first word)."""
    if decision is None:
        return LABEL
    if isinstance(decision, Decision):
        kind, compare = decision.type, decision.judge is not None and decision.judge.compare is not None
        first = decision.judge is not None and decision.judge.first_version
    else:
        kind, compare, first = (
            str(decision.get("type")),
            decision.get("compare") is not None,
            bool(decision.get("first_version")),
        )
    found = KINDS.get(kind, LABEL)
    if found is JUDGED and first and not compare:  # a compared prompt's first version, graded (submit's pin)
        return FIRST
    return COMPARED if found is JUDGED and compare else found


def checks_of(run: Any) -> KindChecks:
    """A run's checks as its kind holds its bars (``DecisionKind.checks``), for the verdict
    (``gate.verdict.update_outcome.run_checks``, ``update_end``; ``run.pinned``: its pin)."""
    return kind_of(run.pinned.decision).checks


def rule_of(decision: StoredDecision) -> FieldsRule | None:
    """The fields rule of a stored decision (a prompt's config, a run's pinned rule), or
    None when it is decided by one label (or not one this code can read); a tool_call
    decision with fields has a ``CallRule``."""
    return kind_of(decision).fields_rule(decision)


def parse_rule(value: Any, file: str | None, has_labels: bool = False, tools: tuple[Tool, ...] = ()) -> Decision:
    """A prompt file's ``decision:``, validated by its kind."""
    if value is None:
        return Decision()
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, Mapping):
        raise SpecError(
            file,
            "decision",
            "must be first_word, or a mapping with type json (field), regex (pattern), fields (fields) "
            "or checks (checks)",
        )
    if str(value.get("type")) == "judge":
        return JUDGED.parse(value, "judge", file, has_labels, tools)
    if str(value.get("type")) == "checks":
        return CHECKS.parse(value, "checks", file, has_labels, tools)
    extra = [k for k in value if k not in ("type", "field", "pattern", "fields")]
    if extra and str(value.get("type")) != "tool_call":
        raise SpecError(
            file, f"decision.{str(extra[0])[:80]}", "unknown field; decision has type, field, pattern, fields"
        )
    kind = str(value.get("type", "first_word")).replace("-", "_")
    if kind not in DECISION_TYPES:
        raise SpecError(file, "decision.type", f"must be one of {', '.join(DECISION_TYPES)}")
    return KINDS[kind].parse(value, kind, file, has_labels, tools)
