"""What a dataset version's expected values are, summarised at import and stored with the
version (``dataset_version.fields["expected"]``), and a fields rule held against it at
submit.

At import, row by row (``ExpectedSummary.add``): every row gives the same form (a label,
or an expected object) and every object the same fields as the first row's — a field
missing from a row, or one the first row does not have, is an error naming both rows; a
field is lists in every row or scalars in every row. Per field the summary keeps which
kinds of values it holds, whether all of them read as numbers (the first that does not,
as an example) and, for text, how many rows hold each value (up to ``MAX_DISTINCT``
values: what a ``label`` field is checked against)::

    {"fields": {"amount": {"kinds": ["number"], "numeric": true, "not_numeric": null,
                           "values": null}, ...}}

At submit (``check_rule``), a prompt decided field by field is refused, in one line, on a
dataset whose rows give labels, or that lacks a declared field, or whose values the
field's comparator cannot read (text for a number, a value that names none of a label
field's labels); a prompt decided by one label is refused on a dataset of objects. The
line quotes no row's value. It names the dataset's fields and counts its rows, which is
right for one who may read the rows and wrong for a holdout's (a pull request's token
guessed a holdout's values one refusal at a time, from how many rows expected a value
none of its labels): so the refusal (``RuleMisfit``) carries a second line, ``withheld``,
for a submitter who may not read them — which dataset, and no field, value or count.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gate.errors import DatasetError, UsageError
from gate.prompt.decision import first_word_label

from .compare import to_decimal
from .rule import FieldsRule

MAX_DISTINCT = 256
MAX_LABEL_VALUE = 128


class FieldStats:
    """One expected field over a version's rows: the kinds of its values, whether they all
    read as numbers, how many rows hold each text (``ExpectedSummary``, and the arguments
    of expected tool calls: ``gate.prompt.structured.expected_calls``)."""

    def __init__(self) -> None:
        self.kinds: set[str] = set()
        self.numeric = True
        self.not_numeric: str | None = None
        self.values: dict[str, int] | None = {}
        self.list_at: str | None = None
        self.scalar_at: str | None = None

    def add(self, value: Any, position: str) -> str | None:
        """Count one row's value; returns why it cannot sit beside the rows before, if so."""
        kind = _kind(value)
        self.kinds.add(kind)
        if kind == "list":
            self.list_at = self.list_at or position
            if self.scalar_at:
                return f"is a list here and not a list at {self.scalar_at}: a field is lists in every row or in none"
        elif kind != "null":
            self.scalar_at = self.scalar_at or position
            if self.list_at:
                return f"is not a list here and a list at {self.list_at}: a field is lists in every row or in none"
        if kind != "null" and (kind == "list" or kind == "boolean" or to_decimal(value) is None):
            if self.numeric:
                self.numeric, self.not_numeric = False, json.dumps(value, ensure_ascii=False)[:40]
        if kind == "string" and self.values is not None:
            if len(value) > MAX_LABEL_VALUE or (value not in self.values and len(self.values) >= MAX_DISTINCT):
                self.values = None
            else:
                self.values[value] = self.values.get(value, 0) + 1
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "kinds": sorted(self.kinds),
            "numeric": self.numeric,
            "not_numeric": self.not_numeric,
            "values": dict(sorted(self.values.items())) if self.values is not None else None,
        }


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "list" if isinstance(value, list) else "string"


class ExpectedSummary:
    """The rows' expected values, row by row (see the module docstring). ``name`` is the
    dataset's, for messages."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.form: str | None = None  # "label" or "fields", from the first row
        self.first: str | None = None  # where the first row stands ("line 2")
        self.fields: dict[str, FieldStats] | None = None

    def add(self, item_id: str, position: str, expected: str, structured: bool) -> None:
        where = f"dataset {self.name}: {position}: item {item_id}"
        form = "fields" if structured else "label" if expected else "none"
        if self.form is None:
            self.form, self.first = form, position
        elif form != self.form:
            gives = {"fields": "an expected object", "label": "a label", "none": "no label"}
            raise DatasetError(
                f"{where}: gives {gives[form]} but {self.first} gives {gives[self.form]}: every row "
                "gives a label, or every row an expected object, or none does (a judged prompt's dataset)"
            )
        if not structured:
            return
        obj = json.loads(expected)
        if self.fields is None:
            self.fields = {name: FieldStats() for name in obj}
        missing = sorted(set(self.fields) - set(obj))
        if missing:
            raise DatasetError(f"{where}: expected field {missing[0]} is missing ({self.first} has it)")
        extra = sorted(set(obj) - set(self.fields))
        if extra:
            raise DatasetError(
                f"{where}: expected field {extra[0]} is not in {self.first}'s expected object: "
                "every row gives the same fields"
            )
        for name, value in obj.items():
            problem = self.fields[name].add(value, position)
            if problem:
                raise DatasetError(f"{where}: expected field {name} {problem}")

    @property
    def unlabelled(self) -> bool:
        """No row gives a label or an expected object (a dataset for judged prompts)."""
        return self.form == "none"

    def to_json(self) -> dict[str, Any] | None:
        """The summary stored with the version; None for rows that give labels."""
        if self.form != "fields" or self.fields is None:
            return None
        return {"fields": {name: stats.to_json() for name, stats in sorted(self.fields.items())}}


WITHHELD = (
    "dataset {dataset}: its expected values do not fit this prompt's decision (its rows are not a "
    "repository's: which field, and why, is said to an admin token only)"
)


class RuleMisfit(UsageError):
    """A decision that cannot read a version's expected values: ``str()`` says why, naming
    fields and counts; ``withheld`` says only which dataset, for a submitter who may not
    read its rows."""

    def __init__(self, message: str, dataset: str):
        super().__init__(message)
        self.withheld = WITHHELD.format(dataset=dataset)


def expected_summary(version_fields: Mapping[str, Any] | None) -> dict | None:
    """A version's summary of expected objects; None when its rows give labels."""
    return (version_fields or {}).get("expected")


def check_rule(rule: FieldsRule | None, version_fields: Mapping[str, Any] | None, dataset: str) -> None:
    """Refuse (RuleMisfit, one line) a prompt whose decision cannot read this version's
    expected values (see the module docstring)."""
    summary = expected_summary(version_fields)
    if rule is None:
        if summary is not None:
            raise RuleMisfit(
                f"dataset {dataset} gives an expected object per row ({', '.join(summary['fields'])}): "
                "decide it field by field (decision: {type: fields, fields: {...}})",
                dataset,
            )
        return
    if summary is None:
        raise RuleMisfit(
            f"dataset {dataset} gives one label per row, not an expected object: a fields decision needs "
            "rows with an expected object (JSONL) or expected.<field> columns (CSV)",
            dataset,
        )
    have = summary.get("fields") or {}
    for spec in rule.fields:
        stats = have.get(spec.name)
        if stats is None:
            raise RuleMisfit(
                f"dataset {dataset}: its expected objects have no field {spec.name} (they have "
                f"{', '.join(sorted(have))})",
                dataset,
            )
        problem = unreadable(spec, stats)
        if problem:
            raise RuleMisfit(f"dataset {dataset}: field {spec.name} ({spec.type}): {problem}", dataset)


def unreadable(spec, stats: Mapping[str, Any]) -> str | None:
    """Why ``spec``'s comparator cannot read the values a field's stats saw, or None."""
    kinds = set(stats.get("kinds") or ()) - {"null"}
    if spec.type == "number" and not stats.get("numeric"):
        return "an expected value is not a number"
    if spec.type == "list" and kinds - {"list"}:
        return "an expected value is not a list"
    if spec.type in ("text", "label") and "list" in kinds:
        return "an expected value is a list"
    if spec.type == "label":
        values = stats.get("values")
        if kinds - {"string"} or values is None:
            return f"its expected values are not labels (over {MAX_DISTINCT} distinct values, or not text)"
        unknown = [v for v in values if first_word_label(v, spec.labels) is None]
        if unknown:
            rows = sum(int(values[v]) for v in unknown)
            return (
                f"{rows:,} row(s) expect one of {len(unknown):,} value(s) that are none of the labels "
                f"({', '.join(spec.labels)})"
            )
    return None
