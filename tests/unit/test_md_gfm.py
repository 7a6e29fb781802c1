"""Untrusted text in the PR comment, through GitHub's own renderer (issue 48, finding 6).

``md()`` broke a URL scheme or ``www.`` only at a word boundary, and GitHub's renderer —
cmark-gfm with its extensions (autolink, table, tagfilter, strikethrough, tasklist) — links
``\\_https://evil.example/phish`` as ``_`` + a live link (the backslash escape ends one text
node, and the autolink extension starts one after it), and ``1https://…``, ``x_http://…``,
``éhttps://…``, ``_www.…``, ``_HTTPS://…`` alike. Each payload here is rendered by cmark-gfm
(the ``cmarkgfm`` bindings: the very C library github.com renders comments with, unlike a
re-implementation such as markdown-it's linkify) as a table cell, a line of its own, and in
the whole comment, and none may make a link, an image, a tag, a mention or a code span."""

from __future__ import annotations

import re

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from test_report_markdown import golden_pr_markdown

from gate.report.markdown_filters import md

# the review's ten spellings of a link after a letter, a digit or "_"
SPELLINGS = [
    "_https://evil.example/phish?login=1",
    "1https://evil.example/phish",
    "x_http://evil.example/a",
    "éhttps://evil.example/a",
    "_www.evil.example/b",
    "_HTTPS://evil.example/a",
    "a1_ftp://evil.example/f",
    "x_www.evil.example/b",
    "__HtTp://evil.example/a",
    "1HTTP://evil.example/x",
]

# the ~50 payloads the review held (tags, </details>, images, javascript: links, fences, |,
# mentions, bidi, workflow commands), kept as they were tried
PAYLOADS = [
    "https://evil.example/x",
    "http://evil.example",
    "HTTPS://EVIL.EXAMPLE",
    "ftp://evil.example/f",
    "www.evil.example",
    "WWW.evil.example/a",
    "mailto:victim@evil.example",
    "victim@evil.example",
    "xmpp:victim@evil.example",
    "<https://evil.example>",
    "(https://evil.example)",
    "*https://evil.example*",
    "~www.evil.example~",
    "[link](https://evil.example)",
    "[link][1]\n\n[1]: https://evil.example",
    "![img](https://evil.example/i.png)",
    "<img src=x onerror=alert(1)>",
    "<a href='https://evil.example'>x</a>",
    "<script>alert(1)</script>",
    "</details><a href=https://evil.example>x</a><details>",
    "</details>",
    "<details open><summary>x</summary>",
    "<!-- x -->",
    "<iframe src=https://evil.example>",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "javascript:alert(1)",
    "<javascript:alert(1)>",
    "[x](data:text/html;base64,PHNjcmlwdD4=)",
    "```\ncode\n```",
    "~~~\ncode",
    "`tick`",
    "    indented code",
    "a|b|c",
    "| a | b |\n|---|---|",
    "@org/team",
    "@octocat hi",
    "#12 and GH-7",
    "acme/prompts#12",
    "\u202eevil\u202c",
    "\u2066bidi\u2069",
    "::add-mask::secret",
    "::warning file=x::y",
    "##[error]boom",
    "::stop-commands::tok",
    "**bold** _em_ ~~s~~",
    "- [ ] task",
    "> quote",
    "1. item",
    "2) item",
    "+ item",
    "* item",
    "---",
    "===",
    "\tindented",
    "# heading",
    "$x^2$",
    "&lt;b&gt; &#x3C;img&#x3E;",
    "line1\r\nline2\u2028line3",
    "[x]: https://evil.example",
    "https:/\u200b/evil.example",
]

GITHUB = ["autolink", "table", "strikethrough", "tagfilter", "tasklist"]


def github(markdown: str) -> str:
    """HTML as GitHub renders a comment (raw HTML left in: GitHub then filters tags itself,
    so a tag that survives here is one the comment let through)."""
    return cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)


def inert(html: str) -> list[str]:
    """What the rendered HTML has that an untrusted value must never make."""
    found = []
    for what, pattern in (
        ("link", r"<a\s"),
        ("image", r"<img"),
        ("tag", r"<(script|iframe|details|summary|/details)"),
        ("code", r"<code"),
        ("mention", r"@[A-Za-z0-9]"),
        ("bidi", "[\u202a-\u202e\u2066-\u2069]"),
        ("strike or emphasis", r"<(del|em|strong)>"),
        ("block", r"<(h\d|blockquote|ul|ol|hr|pre)"),
    ):
        if re.search(pattern, html):
            found.append(what)
    return found


@pytest.mark.parametrize("raw", SPELLINGS + PAYLOADS)
def test_no_untrusted_value_becomes_a_link_or_markup_on_github(raw):
    cell = md(raw)
    for markdown in (
        f"| item | answer |\n|---|---|\n| {cell} | {md('x' + raw)} |",
        str(cell),
        f"answer {cell} ended",
        f"{md('_' + raw)} {md('1' + raw)}",
    ):
        html = github(markdown)
        assert not inert(html), (raw, markdown, html)
    table = github(f"| item | answer |\n|---|---|\n| {cell} | x |")
    assert table.count("<td") == 2, table  # the cell stays one cell


def test_the_ten_spellings_made_links_before(monkeypatch):
    """The renderer does link them when they are not broken: the check above checks something."""
    assert all("<a " in github(raw.replace("\u200b", "")) for raw in SPELLINGS)


@pytest.mark.parametrize("raw", SPELLINGS + PAYLOADS[:30])
def test_the_whole_comment_links_only_what_the_gate_wrote(raw):
    baseline = github(golden_pr_markdown()).count("<a ")
    html = github(golden_pr_markdown(raw))
    assert html.count("<a ") == baseline, raw
    assert "<img" not in html and "<script" not in html, raw
