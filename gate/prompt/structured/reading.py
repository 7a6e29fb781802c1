"""An answer read for a fields decision: the JSON object it holds (the whole answer, a
```` ```json ```` block, or one ``{...}`` amid text, as ``decision: json`` reads it), and
of it only the declared fields, kept as canonical JSON (sorted keys, compact). That text
is the item's ``actual_decision`` and the answer kept for reuse: every comparison is made
on it, so an answer reused by a later run is judged exactly as it was the first time.

A ``label`` field keeps the label its value names (as the rule spells it) when it names
one, else the value as read. A value the gate would not compare — over
``MAX_VALUE_CHARS`` as JSON, nested deeper than ``MAX_VALUE_DEPTH``, not finite, not JSON
at all — is kept as a marker object
(``{"(too long)": 5000}``), which equals no expected value. An answer that holds no
JSON object is ``NOT_AN_OBJECT``; a declared field it lacks is simply absent (the
comparison marks it missing). The answer is the model's, so this is bounded like every
decision: its first ``MAX_ANSWER_CHARS`` only, linear work, at most ``MAX_FIELDS`` values
of at most ``MAX_VALUE_CHARS`` each.
"""

from __future__ import annotations

import json
import math
from typing import Any

from gate.prompt.decision import MAX_ANSWER_CHARS, answer_json, first_word_label, strip_think

from .rule import MAX_VALUE_CHARS, FieldsRule, canonical

NOT_AN_OBJECT = "(not a JSON object)"
# a kept value nests at most this deep: the object it is kept in adds one level, and the
# database's JSON functions (MariaDB: 32 levels) read the other fields past it in SQL
MAX_VALUE_DEPTH = 16
MAX_READ_CHARS = 40_000  # > MAX_FIELDS × (MAX_VALUE_CHARS + a name and its quotes)


def read_answer(rule: FieldsRule, raw_text: str | None) -> str:
    """The declared fields of the answer as canonical JSON, or ``NOT_AN_OBJECT``."""
    if not raw_text:
        return NOT_AN_OBJECT
    found, data = answer_json(strip_think(raw_text[:MAX_ANSWER_CHARS]))
    if not found or not isinstance(data, dict):
        return NOT_AN_OBJECT
    out = {}
    for spec in rule.fields:
        if spec.name in data:
            value = kept(data[spec.name])
            if spec.type == "label":
                value = _as_label(value, spec.labels)
            out[spec.name] = value
    return canonical(out)


def kept(value: Any) -> Any:
    """A value as it is kept: itself when it is small, finite JSON; else a marker object."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"(not a number)": str(value)}
    if isinstance(value, str):
        return value if len(value) <= MAX_VALUE_CHARS else {"(too long)": len(value)}
    if value is None or isinstance(value, (bool, int, float)):
        return value if len(str(value)) <= MAX_VALUE_CHARS else {"(too long)": len(str(value))}
    try:
        text = canonical(value)
    except (ValueError, TypeError, RecursionError):
        return {"(unreadable)": True}
    if len(text) > MAX_VALUE_CHARS:
        return {"(too long)": len(text)}
    depth = nesting(text)
    return value if depth <= MAX_VALUE_DEPTH else {"(too deep)": depth}


def nesting(text: str) -> int:
    """How deep canonical JSON ``text`` nests (brackets outside strings), in one scan."""
    deepest = depth = 0
    quoted = escaped = False
    for ch in text:
        if quoted:
            escaped, quoted = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            quoted = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _as_label(value: Any, labels: tuple[str, ...]) -> Any:
    """The label a scalar names (booleans and numbers as their JSON text), else the value."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, (bool, int, float)):
        text = json.dumps(value)
    else:
        return value
    return first_word_label(text, labels) or value


def parse_read(text: str | None) -> dict | None:
    """What ``read_answer`` kept, back as a dict; None for ``NOT_AN_OBJECT`` (or anything
    that is not such an object: an answer stored before, an error)."""
    if not text or not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
