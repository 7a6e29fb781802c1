"""A decision read from the model's tool call (``decision: {type: tool_call}``,
``gate.prompt.tool_decision``): the called function is the label; with ``fields``, the call's
arguments are compared too, each as a fields decision compares a field (a ``CallRule``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from gate.errors import SpecError
from gate.prompt.structured.expected_calls import check_call_rows
from gate.prompt.structured.reading import parse_read
from gate.prompt.structured.rule import FUNCTION_FIELD, CallRule, FieldsRule, canonical
from gate.prompt.tool_decision import (
    LABEL_NOT_JSON,
    LABEL_OFF_SCHEMA,
    NOT_JSON,
    OFF_SCHEMA,
    PROBLEM_KEY,
    ToolCall,
    call_label,
    call_reading,
    score_calls,
    wrong_calls,
)
from gate.prompt.tools import Tool, call_labels, parse_call_rule
from gate.verdict.scoring import INVALID_DECISION

from . import sections as sec
from .base import (
    EVERY_KIND_BARS,
    LIVE_BARS,
    Decision,
    DecisionKind,
    FigureSource,
    Reading,
    SpecView,
    StoredDecision,
)
from .fields import FIELDS, FieldsKind
from .validity import Invalid, InvalidKind


class ToolCallKind(FieldsKind):
    name = "tool_call"
    bar_scope = "decided by its tool calls"  # how a refused bar names the kind (gate.kinds.bar_fit)
    # by the function called (a label: recall, precision) or, with fields, its arguments too
    bars_computable = EVERY_KIND_BARS | LIVE_BARS | {"min_recall", "min_precision", "min_field_accuracy"}
    report_sections = frozenset({"labels", "fields", "tool_calls"})
    judge_may_decide = True

    def parse(
        self, value: Mapping[str, Any], kind: str, file: str | None, has_labels: bool, tools: tuple[Tool, ...]
    ) -> Decision:
        if not tools:
            raise SpecError(
                file, "decision.type", "tool_call reads the call of a tool: declare the tools (tools: [...])"
            )
        extra = [k for k in value if k not in ("type", "fields")]
        if extra:
            raise SpecError(
                file, f"decision.{str(extra[0])[:80]}", "unknown field; a tool_call decision has type and fields"
            )
        if "fields" not in value:
            return Decision("tool_call")
        if has_labels:
            raise SpecError(
                file, "labels", "a tool_call decision with fields has no labels of its own: its function field has them"
            )
        return Decision("tool_call", fields=parse_call_rule(value["fields"], tools, file))

    def parse_labels(self, value: Any, tools: tuple[Tool, ...], file: str | None) -> tuple[str, ...]:
        return call_labels(value, tools, file)

    def read(self, spec: SpecView, text: str, calls: tuple[ToolCall, ...], too_many: bool) -> Reading:
        if spec.decision.fields is not None:
            return Reading(call_reading(cast(CallRule, spec.decision.fields), calls, too_many), True, calls)
        label = call_label(calls, spec.labels, too_many)
        return Reading(label, label is not None, calls)

    def served(self, spec: SpecView, reading: Reading, raw: str) -> tuple[str, Invalid | None]:
        problems = [c.problem for c in reading.calls if c.problem]
        if reading.decision in (LABEL_NOT_JSON, LABEL_OFF_SCHEMA):
            fallback = NOT_JSON if reading.decision == LABEL_NOT_JSON else OFF_SCHEMA
            return INVALID_DECISION, Invalid(InvalidKind.TOOL_CALL, problems[0] if problems else fallback)
        read = parse_read(reading.decision) if spec.decision.fields is not None else None
        if read is not None and PROBLEM_KEY in read:
            problem = str(read.pop(PROBLEM_KEY))
            return canonical(read), Invalid(InvalidKind.TOOL_CALL, problem)
        return DecisionKind.served(self, spec, reading, raw)

    def scorer(self, rule: FieldsRule, actual: str, expected: str) -> Any:
        return score_calls(cast(CallRule, rule), actual, expected)

    def fields_rule(self, stored: StoredDecision) -> FieldsRule | None:
        """A decision by label alone (None), or one with fields: its ``CallRule``."""
        if not (stored or {}).get("fields"):
            return None
        rule = FIELDS.fields_rule({"type": "fields", "fields": (stored or {})["fields"]})
        return CallRule(rule.fields) if rule is not None and rule.get(FUNCTION_FIELD) else None

    def check_rows(self, rule: FieldsRule | None, version_fields: Mapping[str, Any] | None, dataset: str) -> None:
        if isinstance(rule, CallRule):
            check_call_rows(rule, version_fields, dataset)
        else:
            super().check_rows(rule, version_fields, dataset)

    def field_figures(self, source: FigureSource, run_id: int, rule: FieldsRule) -> dict[str, Any]:
        # a tool call's arguments: counted over the items that expect each
        return source.call_figures(run_id, rule)

    def marks(self, source: FigureSource, run_id: int, stored: StoredDecision) -> dict[str, Any]:
        return {"tool_calls": source.call_marks(run_id, (stored or {}).get("fields") is not None)}

    def flips(self, source: FigureSource, run_id: int, live_id: int, bits: list[tuple[int, int]]) -> list[Any]:
        return source.argument_flips(run_id, live_id, bits)  # an argument: where both compared it

    def own_sections(self) -> tuple[sec.Section, ...]:
        return (sec.FUNCTIONS, sec.ARGUMENTS, sec.CALL_CONFUSION, sec.TOOL_CALLS)

    def call_view(self, stored: StoredDecision) -> str | None:
        return "fields" if (stored or {}).get("fields") is not None else "label"

    def namer(self, rule: FieldsRule, actual: str | None, expected: str) -> Any:
        return wrong_calls(cast(CallRule, rule), actual, expected)


TOOL_CALL = ToolCallKind()
