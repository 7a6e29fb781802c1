"""A decision field by field (``decision: {type: fields, fields: {...}}``,
``gate.prompt.structured``): the answer is an object, each field compared with the item's
expected object by its comparator; per field figures, flips and wrong fields."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, cast

from gate.errors import SpecError
from gate.prompt.answer_schema import SCHEMA_MARK, response_schema, schema_broken, schema_marked, schema_problem
from gate.prompt.structured.compare import score
from gate.prompt.structured.reading import NOT_AN_OBJECT, parse_read, read_answer
from gate.prompt.structured.rule import FieldsRule, canonical, parse_fields
from gate.prompt.structured.samples import wrong_fields
from gate.prompt.tool_decision import ToolCall
from gate.prompt.tools import Tool
from gate.states import Verdict
from gate.verdict.scoring import metrics_from_breakdown

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
    WrongFields,
)
from .validity import Invalid, InvalidKind


class FieldsKind(DecisionKind):
    name = "fields"
    bar_scope = "decided field by field"  # how a refused bar names the kind (gate.kinds.bar_fit)
    # per field, not per label: no confusion matrix for recall or precision
    bars_computable = EVERY_KIND_BARS | LIVE_BARS | {"min_field_accuracy"}
    report_sections = frozenset({"labels", "fields"})
    judge_may_decide = False

    def parse(
        self, value: Mapping[str, Any], kind: str, file: str | None, has_labels: bool, tools: tuple[Tool, ...]
    ) -> Decision:
        if "fields" not in value:
            raise SpecError(file, "decision.fields", "goes with type fields, and type fields needs it")
        if has_labels:
            raise SpecError(
                file,
                "labels",
                "a fields decision has no labels of its own: give a label field its "
                "labels (decision.fields.<name>: {type: label, labels: [...]})",
            )
        return Decision("fields", fields=parse_fields(value["fields"], file))

    def read(self, spec: SpecView, text: str, calls: tuple[ToolCall, ...], too_many: bool) -> Reading:
        schema = response_schema(spec.response_format)
        problem = schema_problem(schema, text) if schema is not None else None
        rule = spec.decision.fields
        assert rule is not None  # parsed with its fields
        read = read_answer(rule, text)
        if problem is not None:
            return Reading(schema_marked(read if read != NOT_AN_OBJECT else "{}", problem), True, calls)
        return Reading(read, read != NOT_AN_OBJECT, calls)

    def served(self, spec: SpecView, reading: Reading, raw: str) -> tuple[str, Invalid | None]:
        read = parse_read(reading.decision)
        if read is not None and schema_broken(reading.decision):
            problem = str(read.pop(SCHEMA_MARK, ""))
            return canonical(read), Invalid(InvalidKind.SCHEMA, problem)
        if reading.valid and reading.decision is not None:
            return reading.decision, None
        return "{}", Invalid(InvalidKind.NOT_AN_OBJECT, "not a JSON object")

    def score(self, decision: Decision | None, actual: str, expected: str) -> dict[str, Any]:
        if decision is None or decision.fields is None:
            return super().score(decision, actual, expected)
        outcome = self.scorer(decision.fields, actual, expected)
        return {
            "verdict": Verdict.MATCH if outcome.match and not schema_broken(actual) else Verdict.MISMATCH,
            "fields_wrong": outcome.wrong,
            "fields_missing": outcome.missing,
        }

    def scorer(self, rule: FieldsRule, actual: str, expected: str) -> Any:
        return score(rule, actual, expected)

    def fields_rule(self, stored: StoredDecision) -> FieldsRule | None:
        try:
            return parse_fields((stored or {}).get("fields"))
        except SpecError:
            return None

    def counts(self, source: FigureSource, run_id: int, stored: StoredDecision) -> dict[str, Any]:
        if self.fields_rule(stored) is None:
            return super().counts(source, run_id, stored)
        # decided field by field: the counts, and per field (gate.prompt.structured)
        rows = cast("Sequence[tuple[str, str, str | None, int]]", source.fields_breakdown(run_id))  # no expected label
        return metrics_from_breakdown(rows, confusion_matrix=False)

    def figures(self, source: FigureSource, run_id: int, stored: StoredDecision) -> dict[str, Any]:
        rule = self.fields_rule(stored)
        return {} if rule is None else {"fields": self.field_figures(source, run_id, rule)}

    def field_figures(self, source: FigureSource, run_id: int, rule: FieldsRule) -> dict[str, Any]:
        return source.fields_figures(run_id, rule)

    def field_flips(
        self, source: FigureSource, run_id: int, live_id: int, rule: FieldsRule, live_rule: FieldsRule | None
    ) -> dict[str, Any]:
        names = [n for n in rule.names if live_rule is not None and n in live_rule.names]
        if not names or live_rule is None:
            return {}
        found = self.flips(source, run_id, live_id, [(rule.bit(n), live_rule.bit(n)) for n in names])
        return dict(zip(names, found))

    def flips(self, source: FigureSource, run_id: int, live_id: int, bits: list[tuple[int, int]]) -> list[Any]:
        return source.field_flips(run_id, live_id, bits)

    def own_sections(self) -> tuple[sec.Section, ...]:
        return (sec.LABELS, sec.FIELDS, sec.FIELD_CONFUSION)

    def wrong_fields(self, stored: StoredDecision) -> WrongFields | None:
        rule = self.fields_rule(stored)
        return None if rule is None else partial(self.namer, rule)

    def namer(self, rule: FieldsRule, actual: str | None, expected: str) -> Any:
        return wrong_fields(rule, actual, expected)


FIELDS = FieldsKind()
