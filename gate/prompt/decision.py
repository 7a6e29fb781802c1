"""Reading a model's answer as one of the prompt's labels.

The label kind (``gate.kinds.label``: ``parse_decision``) reads an answer with one of the
readers below (``first_word_label``, ``json_label``, ``regex_label``): each returns the label
as the spec spells it, or ``None`` when the answer is not one of the labels (the caller
records that as an invalid answer, not an error).

* ``first_word`` (the default): a ``<think>...</think>`` block and leading markdown,
  quotes and punctuation are dropped (``**Yes.**``, ``"no"``, ``> Urgent!``); then the
  answer must **start with** a label, case-insensitively, followed by a word boundary
  (``yes,`` and ``yes.`` count, ``yesterday`` does not). Labels are tried longest first, so
  a multi-word label such as ``not eligible`` wins over ``not``; in labels and answers,
  spaces, ``_`` and ``-`` are interchangeable (``not_eligible`` matches ``Not eligible``).
  So for single-word labels this is exactly "the first word".
* ``json``: the answer is JSON (or holds a ```` ```json ```` fenced block, or one ``{...}``
  object amid text); ``field`` is a dotted path (``result.label``, ``choices.0``) to a
  string (booleans and numbers are compared as their JSON text) equal to a label.
* ``regex``: the first match of ``pattern`` (group 1 when the pattern has a group; the
  pattern's own flags apply, use ``(?i)`` for case-insensitive) equal to a label.

Equality for ``json`` and ``regex`` is the same normalized comparison as above:
case-insensitive, surrounding whitespace, quotes and punctuation ignored, separators
interchangeable.

The answer comes from a model and the rule from a pull request, so parsing is bounded by
construction: only the first ``MAX_ANSWER_CHARS`` characters of an answer are read, and
every step is linear in them — think blocks are cut by a forward scan (a regex
``<think>.*?</think>`` was quadratic: 9 s on 112 KB of ``<think>``), patterns run on RE2
(``gate.prompt.linear_regex``: no backtracking), and JSON nested too deeply for the decoder is
simply not JSON. The worst cases are measured in tests/test_hostile_input.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .linear_regex import compile_pattern

MAX_ANSWER_CHARS = 32 * 1024  # the part of an answer that is read; labels come first
_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_LEAD_NOISE = " \t\r\n*_`\"'“”‘’#>([{:.,;!?~|-"
_TRAIL_NOISE = " \t\r\n*_`\"'“”‘’)]}.,;:!?~|"
_SEP_RE = re.compile(r"[\s_\-]+")
_FENCE_RE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)


def strip_think(text: str) -> str:
    """The answer without its ``<think>...</think>`` blocks (case-insensitive; an unclosed
    one stays), in one forward scan."""
    folded = text.translate(_ASCII_LOWER)  # same length as text: indices carry over
    kept, pos = [], 0
    while True:
        start = folded.find(_THINK_OPEN, pos)
        end = folded.find(_THINK_CLOSE, start + len(_THINK_OPEN)) if start >= 0 else -1
        if end < 0:
            kept.append(text[pos:])
            return "".join(kept)
        kept.append(text[pos:start])
        pos = end + len(_THINK_CLOSE)


def _norm(text: str) -> str:
    return _SEP_RE.sub(" ", text).casefold()


def label_key(text: str) -> str:
    """What the decision step reads a label (or a value naming one) as: surrounding
    markdown, quotes and punctuation dropped, case folded, spaces, ``_`` and ``-`` one
    separator. Two labels with the same key cannot be told apart in an answer."""
    return _norm(text.strip(_LEAD_NOISE).rstrip(_TRAIL_NOISE))


def same_reading(labels: Sequence[str]) -> tuple[str, str] | None:
    """The first two labels the decision step would read as the same (``label_key``), or
    None when it tells them all apart. A label it reads as nothing pairs with itself."""
    seen: dict[str, str] = {}
    for label in labels:
        key = label_key(label)
        if not key:
            return label, label
        if key in seen:
            return seen[key], label
        seen[key] = label
    return None


def _match_label(value: str, labels: Sequence[str]) -> str | None:
    wanted = label_key(value)
    for label in labels:
        if _norm(label) == wanted:
            return label
    return None


def first_word_label(text: str, labels: Sequence[str]) -> str | None:
    """The label ``text`` starts with, as ``first_word`` reads an answer (leading markdown,
    quotes and punctuation dropped; case and separators ignored), or None."""
    return _from_first_word(text, labels)


def answer_json(text: str) -> tuple[bool, Any]:
    """(found, value): the JSON an answer holds (as ``json`` reads it: the whole answer, a
    fenced block, or one ``{...}`` amid text); found is False when none parses."""
    data = _load_json(text)
    return (False, None) if data is _MISSING else (True, data)


def _from_first_word(text: str, labels: Sequence[str]) -> str | None:
    answer = _norm(text.lstrip(_LEAD_NOISE))
    for label in sorted(labels, key=len, reverse=True):
        norm = _norm(label)
        if answer.startswith(norm) and not _is_word_char(answer[len(norm) : len(norm) + 1]):
            return label
    return None


def _is_word_char(ch: str) -> bool:
    return bool(ch) and (ch.isalnum() or ch == "_")


def regex_label(text: str, pattern: str, labels: Sequence[str]) -> str | None:
    """The label the first match of ``pattern`` names, as ``regex`` reads an answer, or None."""
    return _from_regex(text, pattern, labels)


def json_label(text: str, path: str, labels: Sequence[str]) -> str | None:
    """The label at ``path`` of the JSON the answer holds, as ``json`` reads it, or None."""
    return _from_json(text, path, labels)


def _from_regex(text: str, pattern: str, labels: Sequence[str]) -> str | None:
    compiled = compile_pattern(pattern)
    m = compiled.search(text)
    if m is None:
        return None
    value = m.group(1) if compiled.groups else m.group(0)
    return _match_label(value, labels) if value is not None else None


def _from_json(text: str, path: str, labels: Sequence[str]) -> str | None:
    data = _load_json(text)
    if data is _MISSING:
        return None
    value = _dig(data, path)
    if isinstance(value, (bool, int, float)):
        value = json.dumps(value)
    return _match_label(value, labels) if isinstance(value, str) else None


_MISSING = object()


def _load_json(text: str) -> Any:
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE_RE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than the decoder goes
            continue
    return _MISSING


def _dig(data: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data
