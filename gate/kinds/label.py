"""A decision by one label, read three ways (``gate.prompt.decision``): ``first_word`` (the
default), ``json`` (a ``field`` of the answer's JSON) and ``regex`` (a ``pattern``'s first
match). The answer is a label; it matches when it is the item's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from gate.errors import SpecError
from gate.prompt.answer_schema import SCHEMA_MARK, response_schema, schema_problem
from gate.prompt.decision import MAX_ANSWER_CHARS, first_word_label, json_label, regex_label, strip_think
from gate.prompt.linear_regex import PatternError, compile_pattern
from gate.prompt.tool_decision import ToolCall
from gate.prompt.tools import Tool
from gate.verdict.scoring import INVALID_DECISION

from .base import Decision, DecisionKind, Reading, SpecView
from .validity import Invalid, InvalidKind

MAX_JSON_FIELD = 256
TYPES = ("first_word", "json", "regex")


def parse_decision(spec_or_decision: Any, labels: Sequence[str] | None, raw_text: str | None) -> str | None:
    """The canonical label the answer names, or None when it names none of ``labels``
    (``labels`` may be None when a PromptSpec is given: its labels are used)."""
    # a PromptSpec's, or itself (no isinstance: the spec's module loads Jinja2 and YAML)
    decision = cast(Decision, getattr(spec_or_decision, "decision", None) or spec_or_decision)
    if labels is None:
        labels = getattr(spec_or_decision, "labels", ())
    if not raw_text or not labels:
        return None
    text = strip_think(raw_text[:MAX_ANSWER_CHARS])
    if decision.type == "json":
        return json_label(text, decision.field or "decision", labels)
    if decision.type == "regex":
        return regex_label(text, decision.pattern or "", labels)
    return first_word_label(text, labels)


class LabelKind(DecisionKind):
    name = "label"
    bar_scope = "decided by one label"  # how a refused bar names the kind (gate.kinds.bar_fit)

    def parse(
        self, value: Mapping[str, Any], kind: str, file: str | None, has_labels: bool, tools: tuple[Tool, ...]
    ) -> Decision:
        if "fields" in value:
            raise SpecError(file, "decision.fields", "goes with type fields, and type fields needs it")
        if kind == "json":
            fld = value.get("field", "decision")
            if not isinstance(fld, str) or not fld or len(fld) > MAX_JSON_FIELD:
                raise SpecError(file, "decision.field", "must name the JSON field that holds the label")
            return Decision("json", field=fld)
        if kind == "regex":
            pattern = value.get("pattern")
            if not isinstance(pattern, str) or not pattern:
                raise SpecError(file, "decision.pattern", "is required for a regex decision")
            try:
                compile_pattern(pattern)
            except PatternError as exc:
                raise SpecError(file, "decision.pattern", f"invalid regular expression: {exc}") from None
            return Decision("regex", pattern=pattern)
        return Decision()

    def read(self, spec: SpecView, text: str, calls: tuple[ToolCall, ...], too_many: bool) -> Reading:
        schema = response_schema(spec.response_format)
        if schema is not None and schema_problem(schema, text) is not None:
            return Reading(SCHEMA_MARK, True, calls)
        label = parse_decision(spec, spec.labels, text)
        return Reading(label, label is not None, calls)

    def served(self, spec: SpecView, reading: Reading, raw: str) -> tuple[str, Invalid | None]:
        if reading.decision == SCHEMA_MARK:
            schema = response_schema(spec.response_format)
            problem = schema_problem(schema, raw) if schema is not None else None
            return INVALID_DECISION, Invalid(InvalidKind.SCHEMA, problem or "off the schema")
        return super().served(spec, reading, raw)


LABEL = LabelKind()
