"""The mock server's extraction rules: a system message with lines ``- extract <field>:
...`` is answered with a JSON object of those fields, read from the user messages, for
prompts decided field by field (``gate.prompt.structured``)::

    - extract order_id: /ORD-[0-9]+/
    - extract amount: /([0-9]+[.][0-9]{2}) EUR/ as number
    - extract category: billing = refund*, charged twice; shipping = parcel, delivery; other

* ``/pattern/``: the first match in the user text (group 1 when the pattern has a group;
  RE2 syntax, as decision patterns); ``as number`` gives it as a JSON number. No match:
  the field is left out of the answer.
* ``label = keywords; label = keywords; default``: the first label whose keywords (as in
  the classification rules: whole words, ``*`` a prefix, case-insensitive) are in the
  text; else the last part without ``=``, if any (else the field is left out).

Fields come in the order of their lines. Editing a pattern or a keyword list changes the
answers, so a candidate's field accuracy really moves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from gate.prompt.linear_regex import PatternError, compile_pattern

from .policy import content_text, keywords_pattern

EXTRACT_RE = re.compile(r"^\s*[-*\u2022]\s*extract\s+(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*:\s*(?P<spec>.+?)\s*$")
PATTERN_RE = re.compile(r"^/(?P<pattern>.+)/(?P<number>\s+as\s+number)?$")


@dataclass(frozen=True)
class FieldRule:
    name: str
    pattern: Any = None  # a compiled RE2 pattern
    number: bool = False
    classes: tuple[tuple[str, re.Pattern], ...] = ()
    default: str | None = None

    def value(self, text: str) -> Any:
        if self.pattern is not None:
            found = self.pattern.search(text)
            if found is None:
                return None
            value = found.group(1) if self.pattern.groups else found.group(0)
            return _number(value) if self.number else value
        for label, keywords in self.classes:
            if keywords.search(text):
                return label
        return self.default


def _number(text: str | None) -> Any:
    try:
        number = float(text or "")
    except ValueError:
        return text
    return int(number) if number.is_integer() and "." not in (text or "") else number


@lru_cache(maxsize=256)
def extraction_rules(system_text: str) -> tuple[FieldRule, ...]:
    rules = []
    for line in system_text.splitlines():
        m = EXTRACT_RE.match(line)
        if m:
            rule = _field_rule(m.group("name"), m.group("spec"))
            if rule is not None:
                rules.append(rule)
    return tuple(rules)


def _field_rule(name: str, spec: str) -> FieldRule | None:
    pattern = PATTERN_RE.match(spec)
    if pattern:
        try:
            return FieldRule(
                name, pattern=compile_pattern(pattern.group("pattern")), number=bool(pattern.group("number"))
            )
        except PatternError:
            return None
    classes, default = [], None
    for part in spec.split(";"):
        label, sep, keywords = part.partition("=")
        if not sep:
            default = part.strip() or default
            continue
        compiled = keywords_pattern(keywords)
        if label.strip() and compiled is not None:
            classes.append((label.strip(), compiled))
    return FieldRule(name, classes=tuple(classes), default=default)


def extract(messages: Sequence[dict]) -> str | None:
    """The JSON answer to a request whose system message has extraction rules; None
    when it has none (the classification rules answer it)."""
    system = "\n".join(content_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer"))
    if "extract" not in system:
        return None
    rules = extraction_rules(system)
    if not rules:
        return None
    text = "\n".join(content_text(m.get("content")) for m in messages if m.get("role") == "user")
    answer = {}
    for rule in rules:
        value = rule.value(text)
        if value is not None:
            answer[rule.name] = value
    return json.dumps(answer, ensure_ascii=False)
