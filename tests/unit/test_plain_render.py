"""Plain templates render without Jinja's per-render machinery (``templating.render_plain``):
for every template and item, the same text as Jinja's own render, or the same refusal."""

from __future__ import annotations

import pytest

from gate.prompt.templating import TemplateProblem, render, render_plain

TEMPLATES = [
    "Answer yes or no: {{ item.text }}",
    "{{ item.text }}",
    "static text only\n",
    "",
    "{{item.a}}{{ item.b }}",
    "{{ item['text'] }} and {{ item.nested.x }} and {{ item['nested']['y'] }}",
    "{{ item }}",
    "{{ item.items }}",
    "{{ item.keys }}",
    "{{ item.pop }}",
    "{{ item.__class__ }}",
    "{{ item.missing }}",
    "{{ item.nested.missing }}",
    "{{ item.text.upper }}",
    "{{ item.list[0] }}",
    "{{ item['list'][1] }}",
    "line one\n{{ item.text }}\nline three\n",
    "{{ 'const' }} {{ item.text }}",
    "{{ item.n }}",
    "{{ item.f }} {{ item.b }} {{ item.none }} {{ item.list }} {{ item.nested }}",
    "{% raw %}{{ x }}{% endraw %}",
    "{# a comment #}{{ item.text }}",
    "{{- item.text -}}  tail",
    '{{ item["a b"] }}',
    "{{ item.ünï }}",
]
ITEMS = [
    {
        "text": "hello",
        "a": 1,
        "b": True,
        "nested": {"x": "X", "y": None},
        "list": ["p", 2],
        "n": 0,
        "f": 1.5,
        "none": None,
        "a b": "spaced",
        "ünï": "ço",
    },
    {
        "text": 'quote " and {{ braces }} and \u2028',
        "a": "",
        "b": False,
        "nested": {"x": [1], "y": {"z": 1}},
        "list": [],
        "n": -3,
        "f": 1e300,
        "none": None,
        "a b": 0,
        "ünï": "",
    },
    {"text": 12, "items": "shadowed", "keys": "k", "pop": "p"},
    {},
]


def _jinja(source, item):
    try:
        return render(source, item)
    except TemplateProblem as exc:
        return ("refused", str(exc))


def _fast(source, item):
    try:
        return render_plain(source, item)
    except TemplateProblem as exc:
        return ("refused", str(exc))


@pytest.mark.parametrize("source", TEMPLATES)
def test_plain_rendering_is_jinjas(source):
    for item in ITEMS:
        assert _fast(source, item) == _jinja(source, item), (source, item)
