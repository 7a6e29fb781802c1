"""A fields decision as the prompt file declares it::

    decision:
      type: fields
      fields:
        order_id: exact                                   # the comparator's name alone
        category: {type: label, labels: [billing, shipping, account, other]}
        amount: {type: number, tolerance: 0.01}           # and/or relative: 0.02
        customer: {type: text, normalize: NFKC}           # case-folded, whitespace collapsed
        tags: {type: list, ordered: false, items: text}   # a set by default

Comparators:

* ``exact``: the same JSON value (numbers compare as numbers: 1 and 1.0 agree; a string
  never equals a number);
* ``label``: one of ``labels``, read as ``first_word`` reads an answer (markdown, quotes,
  punctuation and case dropped; the value must start with the label);
* ``number``: a number or a numeric string, within ``tolerance`` (absolute) or
  ``relative`` (a fraction of the expected value) — either suffices; exact by default;
* ``text``: case-folded, whitespace collapsed, optionally Unicode-normalised (``NFC``,
  ``NFKC``...);
* ``list``: a list of scalars, as a set (default) or ``ordered``, items compared
  ``exact`` (default) or as ``text``.

The file comes from a pull request, so everything is bounded here: at most
``MAX_FIELDS`` fields named like identifiers (they go into JSON paths), at most
``MAX_LABELS`` labels per label field, tolerances finite decimals. Fields are kept sorted
by name: a field's bit in the stored masks is its place in that order.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from gate.errors import SpecError

COMPARATORS = ("exact", "label", "number", "text", "list")
MAX_FIELDS = 32  # a field is a bit of a BIGINT mask
MAX_LABELS = 256
MAX_LABEL_CHARS = 128
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")  # fullmatch; safe in a JSON path
NormalForm = Literal["NFC", "NFD", "NFKC", "NFKD"]
NORMAL_FORMS: tuple[NormalForm, ...] = ("NFC", "NFD", "NFKC", "NFKD")
LIST_ITEMS = ("exact", "text")
OPTIONS = {
    "exact": (),
    "label": ("labels",),
    "number": ("tolerance", "relative"),
    "text": ("normalize",),
    "list": ("ordered", "items"),
}
MAX_VALUE_CHARS = 1000  # a value, as JSON, that the gate compares (answer or expected)
_LABEL_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_RESERVED_LABEL = re.compile(r"\(.*\)", re.DOTALL)


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: str
    labels: tuple[str, ...] = ()
    tolerance: Decimal | None = None
    relative: Decimal | None = None
    normalize: NormalForm | None = None
    ordered: bool = False
    items: str = "exact"

    def to_dict(self) -> dict[str, Any]:
        """The canonical form stored with the prompt (only what differs from the defaults)."""
        out: dict[str, Any] = {"type": self.type}
        if self.labels:
            out["labels"] = list(self.labels)
        if self.tolerance is not None:
            out["tolerance"] = f"{self.tolerance:f}"
        if self.relative is not None:
            out["relative"] = f"{self.relative:f}"
        if self.normalize is not None:
            out["normalize"] = self.normalize
        if self.ordered:
            out["ordered"] = True
        if self.items != "exact":
            out["items"] = self.items
        return out


@dataclass(frozen=True)
class FieldsRule:
    fields: tuple[FieldSpec, ...]  # sorted by name

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def bit(self, name: str) -> int:
        """The field's bit in the masks (``compare``), by its place in name order."""
        return 1 << self.names.index(name)

    @property
    def all_bits(self) -> int:
        return (1 << len(self.fields)) - 1

    def get(self, name: str) -> FieldSpec | None:
        return next((f for f in self.fields if f.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: f.to_dict() for f in self.fields}


FUNCTION_FIELD = "function"  # a tool_call decision's field of the called function
NO_CALL = "none"  # ... when the model called none


@dataclass(frozen=True)
class CallRule(FieldsRule):
    """The fields of a decision read from a tool call (``decision: {type: tool_call,
    fields: {...}}``, ``gate.prompt.tool_decision``): ``function`` (a label field over the
    declared functions and ``none``) and the arguments compared, each as a fields decision
    compares a field; an argument is compared on the items whose expected call has it."""

    @property
    def functions(self) -> tuple[str, ...]:
        spec = self.get(FUNCTION_FIELD)
        return tuple(label for label in spec.labels if label != NO_CALL) if spec else ()


def parse_fields(value: Any, file: str | None = None, where: str = "decision.fields") -> FieldsRule:
    """The ``fields`` mapping of a decision, validated (each problem a SpecError naming the
    field)."""
    if not isinstance(value, Mapping) or not value:
        raise SpecError(
            file,
            where,
            "must map each field of the answer to its comparator: "
            f"{', '.join(COMPARATORS)} (e.g. {{order_id: exact, amount: {{type: number, tolerance: 0.01}}}})",
        )
    if len(value) > MAX_FIELDS:
        raise SpecError(file, where, f"declares {len(value)} fields: at most {MAX_FIELDS}")
    fields = []
    for name, spec in value.items():
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise SpecError(
                file,
                where,
                f"{str(name)[:40]!r} is not a field name: letters, digits and _, "
                "starting with a letter or _, at most 64 characters",
            )
        fields.append(_parse_field(name, spec, file, f"{where}.{name}"))
    return FieldsRule(tuple(sorted(fields, key=lambda f: f.name)))


def _parse_field(name: str, spec: Any, file: str | None, where: str) -> FieldSpec:
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, Mapping):
        raise SpecError(file, where, f"must be a comparator ({', '.join(COMPARATORS)}) or a mapping with type")
    kind = spec.get("type")
    if kind not in COMPARATORS:
        raise SpecError(file, f"{where}.type", f"must be one of {', '.join(COMPARATORS)}")
    extra = [k for k in spec if k != "type" and k not in OPTIONS[kind]]
    if extra:
        allowed = ", ".join(OPTIONS[kind]) or "no options"
        raise SpecError(file, f"{where}.{str(extra[0])[:40]}", f"unknown option; a {kind} field has {allowed}")
    if kind == "label":
        return FieldSpec(name, kind, labels=_labels(spec.get("labels"), file, f"{where}.labels"))
    if kind == "number":
        tolerance = _amount(spec.get("tolerance"), file, f"{where}.tolerance", None)
        relative = _amount(spec.get("relative"), file, f"{where}.relative", Decimal(1))
        return FieldSpec(name, kind, tolerance=tolerance, relative=relative)
    if kind == "text":
        form = spec.get("normalize")
        if form is not None and form not in NORMAL_FORMS:
            raise SpecError(file, f"{where}.normalize", f"must be one of {', '.join(NORMAL_FORMS)}")
        return FieldSpec(name, kind, normalize=form)
    if kind == "list":
        ordered, items = spec.get("ordered", False), spec.get("items", "exact")
        if not isinstance(ordered, bool):
            raise SpecError(file, f"{where}.ordered", "must be true (order matters) or false (a set)")
        if items not in LIST_ITEMS:
            raise SpecError(file, f"{where}.items", f"must be one of {', '.join(LIST_ITEMS)}")
        return FieldSpec(name, kind, ordered=ordered, items=items)
    return FieldSpec(name, kind)


def _labels(value: Any, file: str | None, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) < 2 or len(value) > MAX_LABELS:
        raise SpecError(file, where, f"a label field needs a list of 2 to {MAX_LABELS} labels")
    seen = set()
    for label in value:
        if (
            not isinstance(label, str)
            or not label.strip()
            or label != label.strip()
            or len(label) > MAX_LABEL_CHARS
            or _LABEL_CONTROL.search(label)
        ):
            raise SpecError(
                file,
                where,
                f"{str(label)[:40]!r} is not a label: a non-empty string of at most "
                f"{MAX_LABEL_CHARS} characters, no surrounding spaces or control characters",
            )
        if _RESERVED_LABEL.fullmatch(label):
            raise SpecError(file, where, f"{label!r} is reserved: labels in parentheses are the gate's own markers")
        if label.casefold() in seen:
            raise SpecError(file, where, f"{label!r} is listed twice (labels compare case-insensitively)")
        seen.add(label.casefold())
    return tuple(value)


def _amount(value: Any, file: str | None, where: str, most: Decimal | None) -> Decimal | None:
    """A tolerance: a finite decimal ≥ 0 (at most ``most``), at most 12 decimals."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise SpecError(file, where, "must be a number ≥ 0")
    try:
        amount = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise SpecError(file, where, f"{str(value)[:40]!r} is not a number") from None
    exponent = amount.as_tuple().exponent  # an int when finite ("n", "N" or "F" when not)
    if (
        not amount.is_finite()
        or amount < 0
        or (most is not None and amount > most)
        or amount > 10**12
        or (isinstance(exponent, int) and exponent < -12)
    ):
        upper = f" and at most {most}" if most is not None else ""
        raise SpecError(file, where, f"{str(value)[:40]!r} is out of range: a number ≥ 0{upper}, at most 12 decimals")
    return amount


def canonical(value: Any) -> str:
    """Canonical JSON: sorted keys, compact, non-ASCII kept, no NaN."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def normal_text(value: str, form: NormalForm | None) -> str:
    """A text value as the ``text`` comparator reads it."""
    if form:
        value = unicodedata.normalize(form, value)
    return " ".join(value.casefold().split())
