"""The Markdown reports' filters (``gate.report.markdown`` registers them): ``md`` makes untrusted
text inert, the others format a figure the gate computed. Each returns :class:`Safe`, the
only kind of string the reports' environment prints.

``md`` makes a value inert inline Markdown: one line (line breaks become ``↵``), HTML
special characters as entities, Markdown punctuation backslash-escaped (so ``|`` cannot
end a table cell, backticks cannot open code and ``[`` cannot start a link or image), a
zero-width joiner after ``@`` and ``#`` (no @-mention of a person or team, no issue
cross-reference), and URL schemes and ``www.`` broken with a zero-width space wherever they
stand (no autolink: checked through cmark-gfm, GitHub's renderer, in the tests). Control
and bidi-override characters are dropped."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from gate.untrusted import CONTROL, LINE_BREAKS
from gate.verdict.scoring import format_bar, format_pct
from gate.verdict.stats import format_p

from .judge_view import compared_accuracy
from .text import difference as difference_text

ZWJ = "\u200d"
ZWSP = "\u200b"


class UnescapedOutput(TypeError):
    """A template tried to print a value that went through no escaping filter."""


class Safe(str):
    """Text that is already fit for the report (escaped, or made by a trusted formatter)."""


# --- escaping ------------------------------------------------------------------------------------

_PUNCT = re.compile(r"([\\`*_\[\]|~$])")  # ( ) ! need a [ to make a link or image


# Wherever it stands, not only at a word boundary: GitHub's renderer (cmark-gfm's autolink
# extension) links ``https://`` after a letter, a digit or ``_`` too (``\\_https://``, ``1https://``,
# ``éhttps://``: issue 48, finding 6), and ``www.`` after an escaped ``_``.
_SCHEME = re.compile(r"(?i)(https?|ftp|mailto|xmpp|javascript|data|file|vbscript|ssh|git):")


_WWW = re.compile(r"(?i)www\.")


_GH_REF = re.compile(r"(?i)\bGH-(?=\d)")


def md(value: Any, limit: int | None = None) -> Safe:
    """Untrusted text → inert, single-line inline Markdown (safe in a table cell)."""
    if value is None:
        return Safe("")
    if isinstance(value, Safe):
        return value
    text = str(value)
    cut = limit is not None and len(text) > limit
    if cut:
        text = text[:limit]
    text = LINE_BREAKS.sub(" ↵ ", text)
    text = CONTROL.sub("", text).replace("\t", " ")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _PUNCT.sub(r"\\\1", text)
    text = _SCHEME.sub(lambda m: m.group(1) + ZWSP + ":", text)
    text = _WWW.sub(lambda m: m.group(0)[:3] + ZWSP + ".", text)
    text = _GH_REF.sub(lambda m: m.group(0)[:2] + ZWJ + "-", text)
    text = text.replace("@", "@" + ZWJ)
    text = re.sub(r"#(?=\w)", "#" + ZWJ, text)
    if text[:1] in ("-", "+", "#", "=", "."):
        text = "\\" + text
    elif text[:1] == " ":  # four at a line's start would open a code block
        text = "&#32;" + text[1:]
    else:  # "1." or "2)" at a line's start would open an ordered list
        text = re.sub(r"^([0-9]{1,9})([.)])(?= |$)", r"\1\\\2", text)
    if cut:
        text += "…"
    return Safe(text)


def code(value: Any) -> Safe:
    """A short identifier we made ourselves (hash, version) as inline code: only
    ``[A-Za-z0-9:._/+=-]`` survive, so nothing can escape the code span."""
    if value is None or value == "":
        return Safe("")
    text = re.sub(r"[^A-Za-z0-9:._/+=-]", "", str(value))[:80]
    return Safe(f"`{text}`") if text else Safe("")


def short_hash(value: Any, n: int = 12) -> Safe:
    if not value:
        return Safe("")
    text = str(value)
    prefix = ""
    if ":" in text:
        prefix, text = text.split(":", 1)
        prefix += ":"
    return code(prefix + text[:n])


def mermaid_label(value: Any) -> Safe:
    """A dataset name for a Mermaid chart: quoted, only safe characters."""
    text = re.sub(r"[^A-Za-z0-9._ -]", "", str(value or ""))[:40] or "?"
    return Safe(f'"{text}"')


# --- formatting what the gate computed ------------------------------------------------------


def num(value: Any) -> Safe:
    if value is None:
        return Safe("")
    if isinstance(value, bool):
        return Safe("yes" if value else "no")
    if isinstance(value, int):
        return Safe(str(value))
    if isinstance(value, (float, Decimal)):
        return Safe(f"{float(value):g}")
    raise UnescapedOutput(f"num got {type(value).__name__}")


def pct(value: Any) -> Safe:
    """A raw accuracy (fraction) as a percentage with one decimal."""
    if value is None:
        return Safe("n/a")
    return Safe(f"{100 * float(value):.1f}%")


def run_pct(run: Any) -> Safe:
    """A run's accuracy against its bar: never a number that rounds onto the other side of
    the bar it is judged by (``scoring.format_pct``)."""
    figure = run.figure  # the figure min_accuracy compares (a judge-corrected pass rate: it, not matches / scored)
    if figure["as_judged"]:
        return Safe(f"{figure['shown']} ({figure['as_judged']}, {run.matches:,}/{run.scored:,})")
    if not run.scored:
        return pct(run.accuracy)
    return Safe(compared_accuracy(run) or format_pct(run.matches, run.scored, run.bar))


def run_counts(run: Any) -> Safe:
    """ "(20/30)" after a run's figure, when that figure is matches / scored (a corrected rate's
    run_pct says them; a comparison's are the items compared, not these)."""
    return Safe(f" ({run.matches:,}/{run.scored:,})" if run.scored and run.figure["of"] == "accuracy" else "")


def chart_pct(value: Any) -> Safe:
    if value is None:
        return Safe("0")
    return Safe(f"{100 * float(value):.1f}")


def points(value: Any) -> Safe:
    """A change in percentage points, signed."""
    return Safe("n/a" if value is None else f"{float(value):+.1f} pts")


def interval(value: Any) -> Safe:
    """A Wilson interval (two fractions) as "[a–b]" in percent."""
    if not value:
        return Safe("")
    return Safe(f"[{100 * float(value[0]):.1f}–{100 * float(value[1]):.1f}]")


def difference(compared: Any) -> Safe:
    """The paired difference with its interval: "−1.2 pts \\[−3.4, +0.9\\] (95% interval)"."""
    return md(difference_text(compared))


def pvalue(value: Any) -> Safe:
    return Safe("n/a" if value is None else format_p(float(value)))


def ratio(value: Any) -> Safe:
    """A precision, recall or F1 (fraction or None) with two decimals; "–" when undefined."""
    return Safe("–" if value is None else f"{float(value):.2f}")


def usd(value: Any) -> Safe:
    """Dollars (exact decimal text) with 4 decimals, or "<$0.0001"."""
    amount = Decimal(str(value))
    return Safe("<$0.0001" if 0 < amount < Decimal("0.0001") else f"${amount:.4f}")


def bar_pct(value: Any) -> Safe:
    return Safe(format_bar(Decimal(value)))


def decided(decision: Any, wrong_fields: Any = None, actual: bool = False) -> Safe:
    """A decision in an item's row: a label; for a fields decision only the fields that did
    not match, ``field: value`` (what was expected, or with ``actual`` what was read, or
    *missing*)."""
    if wrong_fields is None:
        return md(decision, 60)
    if not actual:  # a problem of the answer (``(schema)``, ``(arguments)``) has no expected value
        wrong_fields = [w for w in wrong_fields if not str(w["field"]).startswith("(")]
    if not wrong_fields:
        return Safe("every field right")
    parts = []
    for w in wrong_fields:
        if actual and w["missing"]:
            where = f"sent to {md(w['sent_to'], 64)} instead" if w.get("sent_to") else "missing"
            parts.append(f"{md(w['field'], 64)}: *{where}*")
            continue
        value = w["actual"] if actual else w["expected"]
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{md(w['field'], 64)}: {md(shown, 60)}")
    return Safe("; ".join(parts))


_URL_RE = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~/-]*)?")


def link(url: Any, text: str) -> Safe:
    """A link we built ourselves (the workflow run): only a plain http(s) URL is linked."""
    if not url or not _URL_RE.fullmatch(str(url)):
        return Safe("")
    return Safe(f"[{md(text)}]({url})")
