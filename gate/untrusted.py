"""Untrusted text made inert for where it is printed.

Item ids, dataset cells, model answers, file names and prompt fields come from people the
team does not control (a pull request, a dataset, a model). Printed raw they can act on
what shows them: a terminal obeys escape sequences (``\\x1b]0;title\\x07`` retitles it,
``\\x1b[2J`` clears it), and a GitHub Actions log obeys any line that starts with ``::``
(``::add-mask::``, ``::warning``, ``::stop-commands::``) or ``##[`` (the older form). One
module says how each medium is neutralised; the Markdown report has its own escaping in
``gate.report.markdown_filters``, which shares the control-character set below.

* ``one_line(text)``: line breaks become `` ↵ `` and control / bidi-override characters
  are dropped, so a value can never start a line of its own.
* ``terminal_safe(text)``: ``one_line`` for a terminal.
* ``workflow_safe(text)``: ``one_line`` plus ``::`` and ``##[`` broken, for a line of the
  Actions log (GitHub's toolkit escapes command values the same way: no CR, no LF).
* ``storable(text)``: half a surrogate pair (``"\\ud800"`` alone in JSON decodes to a str
  no UTF-8 codec, nor the database, accepts) becomes U+FFFD.
"""

from __future__ import annotations

import re
from typing import Any

LINE_BREAKS = re.compile(r"\r\n|[\r\n\u2028\u2029\x85\x0b\x0c]")
CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\u202a-\u202e\u2066-\u2069\ufeff]")
ZWSP = "\u200b"
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(text: str) -> str:
    """The text with any lone surrogate replaced by U+FFFD (a valid pair in a Python str is
    already one code point, so only halves match)."""
    return text if text.isascii() else LONE_SURROGATE.sub("\ufffd", text)


def one_line(value: Any, limit: int | None = None) -> str:
    """The text on one line, without control or bidi-override characters, at most
    ``limit`` characters (cut with …)."""
    if value is None:
        return ""
    text = str(value)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    text = LINE_BREAKS.sub(" ↵ ", text)
    return CONTROL.sub("", text).replace("\t", " ")


def terminal_safe(value: Any, limit: int | None = None) -> str:
    return one_line(value, limit)


def workflow_safe(value: Any, limit: int | None = None) -> str:
    """For a line of a GitHub Actions log: the runner acts on a line whose trimmed text
    starts with ``::`` or ``##[``; broken with a zero-width space, it is plain text."""
    return one_line(value, limit).replace("::", ":" + ZWSP + ":").replace("##[", "#" + ZWSP + "#[")


def workflow_lines(text: str) -> str:
    """Several lines we composed, each made safe for the log as above (for a multi-line
    report that holds untrusted values)."""
    return "\n".join(workflow_safe(line) for line in text.split("\n"))
