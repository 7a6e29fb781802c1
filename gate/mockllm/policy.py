"""The mock server's answer policy: rules read from the system message, the label they
give a user message, and the answer's format (see the package docstring)."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

MODEL_ID = "mock-llm"
NO_RULE_ANSWER = "unknown"
GARBAGE_WORDS = ("maybe", "perhaps", "unsure", "banana", "lorem")
FORCED_ERROR_RE = re.compile(r"^mock-error-(\d{3})$")

_BULLET = r"^\s*[-*\u2022]\s*"
_LABEL = r"[A-Za-z0-9_.\-]+(?:[ \t]+[A-Za-z0-9_.\-]+)*"
RULE_RE = re.compile(_BULLET + rf"(?P<label>{_LABEL})[ \t]*:[ \t]*(?P<keywords>.+?)\s*$")
DEFAULT_RE = re.compile(r"^\s*(?:[-*\u2022]\s*)?default[ \t]*:[ \t]*(?P<label>" + _LABEL + r")[ \t.]*$", re.IGNORECASE)


@dataclass(frozen=True)
class Rule:
    label: str
    keywords: tuple[str, ...]
    pattern: re.Pattern


@dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...]
    default: str | None

    @property
    def labels(self) -> tuple[str, ...]:
        seen = dict.fromkeys(r.label for r in self.rules)
        if self.default:
            seen.setdefault(self.default)
        return tuple(seen)

    def answer(self, text: str) -> str:
        text = _normalize_quotes(text)
        for rule in self.rules:
            if rule.pattern.search(text):
                return rule.label
        if self.default:
            return self.default
        return self.rules[-1].label if self.rules else NO_RULE_ANSWER


def _normalize_quotes(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')


def _keyword_regex(keyword: str) -> str:
    prefix = keyword.endswith("*")
    words = keyword.rstrip("*").split()
    body = r"\s+".join(re.escape(w) for w in words)
    return rf"(?<!\w){body}" + (r"\w*" if prefix else r"(?!\w)")


def _split_keywords(raw: str) -> tuple[str, ...]:
    raw = raw.rstrip().rstrip(".")
    keywords = []
    for kw in raw.split(","):
        kw = _normalize_quotes(kw).strip().strip("\"'`").strip()
        if kw.rstrip("*"):
            keywords.append(kw.casefold())
    return tuple(keywords)


def keywords_pattern(raw: str) -> re.Pattern | None:
    """One rule's comma-separated keywords as a case-insensitive pattern (None: none)."""
    keywords = _split_keywords(raw)
    return re.compile("|".join(_keyword_regex(k) for k in keywords), re.IGNORECASE) if keywords else None


@lru_cache(maxsize=256)
def parse_rules(system_text: str) -> Policy:
    """The rules written in a system message (see the module docstring)."""
    rules, default = [], None
    for line in system_text.splitlines():
        d = DEFAULT_RE.match(line)
        if d:
            default = d.group("label")
            continue
        m = RULE_RE.match(line)
        if not m:
            continue
        keywords = _split_keywords(m.group("keywords"))
        if keywords:
            alternation = "|".join(_keyword_regex(k) for k in keywords)
            rules.append(Rule(m.group("label"), keywords, re.compile(alternation, re.IGNORECASE)))
    return Policy(tuple(rules), default)


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def decide(messages: Sequence[dict]) -> tuple[str, Policy]:
    """The label the policy picks for a chat request's messages."""
    system = "\n".join(content_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer"))
    user = "\n".join(content_text(m.get("content")) for m in messages if m.get("role") == "user")
    policy = parse_rules(system)
    return policy.answer(user), policy


def garbage_word(labels: Iterable[str], rng: random.Random) -> str:
    taken = {label.casefold() for label in labels}
    choices = [w for w in GARBAGE_WORDS if w not in taken]
    return rng.choice(choices) if choices else "zzz-not-a-label"


def format_answer(label: str, response_format: Any) -> str:
    if not isinstance(response_format, dict):
        return label
    kind = response_format.get("type")
    if kind == "json_object":
        return json.dumps({"decision": label})
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema") or {}
        props = list((schema.get("properties") or {}).keys())
        return json.dumps({props[0] if props else "decision": label})
    return label


def count_tokens(text: str) -> int:
    """A cheap estimate: words."""
    return len(text.split())
