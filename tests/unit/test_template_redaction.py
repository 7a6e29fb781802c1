"""A template's problem never quotes the item it rendered (issue 33, finding 1): Jinja's
messages quote the key a lookup missed and Python's exceptions what they were given, so
``{{ {}[item.subject ~ " | " ~ item.text] }}`` failed with the row's subject and text in
its message — and that message reached the run's reason, which any reader sees. A key the
template writes itself (a typo) is still quoted: the author needs it and it is theirs."""

from __future__ import annotations

import pytest

from gate.prompt.sandbox import RenderBudget, RenderPool
from gate.prompt.templating import TemplateProblem, check_template, render, render_plain

SECRET = "SECRET-HOLDOUT-00"
ITEM = {
    "subject": "HOLDSUBJ-00",
    "text": f"Our store is down, {SECRET} 5€",
    "n": 3,
    "list": [1, 2],
    "number_text": "12",
}

# (template, what its problem says): each computes something from the item that Python or
# Jinja would quote in its message
LEAKY = [
    ('{{ {}[item.subject ~ " | " ~ item.text] }}', "has no attribute (a key the template computed"),
    ("{{ {}[item.text] }}", "has no attribute (a key the template computed"),
    ("{{ item.text | attr(item.subject) }}", "has no attribute (a key the template computed"),
    ("{{ item.list[item.n] }}", "has no element (a key the template computed"),
    ("{{ item.list[item.number_text | int] }}", "has no element (a key the template computed"),
    ('{{ item | attr("_" ~ item.text) }}', "(a key the template computed"),
    ('{{ ("%(" ~ item.text ~ ")s") % {} }}', "KeyError (its message is not shown"),
    ('{{ "{0[" ~ item.text ~ "]}".format({}) }}', "ValueError (its message is not shown"),
    ('{{ "{:" ~ item.text ~ "}" }}{{ ("{:" ~ item.text ~ "}").format(1) }}', "ValueError (its message is not shown"),
    ("{{ item.text.split().index(item.subject) }}", "ValueError (its message is not shown"),
    ('{{ item.text.encode("ascii") }}', "UnicodeEncodeError (its message is not shown"),
    ("{{ item.text.encode(item.subject) }}", "LookupError (its message is not shown"),
    ("{{ item.subject | xmlattr }}{{ {item.text: 1} | xmlattr }}", "(its message is not shown"),
    ("{{ 2 ** (item.n * 5000) }}", "an exponent over 10000 is too large"),
]


@pytest.fixture(scope="module")
def pool():
    pool = RenderPool(RenderBudget(cpu_seconds=2.0, memory_mb=64, processes=1))
    yield pool
    pool.close()


@pytest.mark.parametrize("template, says", LEAKY, ids=[t for t, _ in LEAKY])
def test_a_template_problem_quotes_nothing_of_the_item(pool, template, says):
    check_template(template)  # passes the submit checks: it fails only on the rows
    for render_item in (lambda: render(template, ITEM), lambda: pool.render([template], ITEM)):
        with pytest.raises(TemplateProblem) as caught:
            render_item()
        message = str(caught.value)
        assert says in message, message
        for value in ("HOLDSUBJ", SECRET, "store is down", "€", "12"):
            assert value not in message, (value, message)


@pytest.mark.parametrize(
    "template, says",
    [
        ("{{ item.subjet }}", "'dict object' has no attribute 'subjet'"),
        ('{{ item["sub ject"] }}', "'dict object' has no attribute 'sub ject'"),
        ("{{ item.list[7] }}", "list object has no element 7"),
        ("{{ item.text.nope }}", "'str object' has no attribute 'nope'"),
        ("{{ item.text < 3 }}", "TypeError: '<' not supported between instances of 'str' and 'int'"),
        ("{{ item.text + 1 }}", 'TypeError: can only concatenate str (not "int") to str'),
        ("{{ item.n / 0 }}", "ZeroDivisionError: division by zero"),
        ("{{ [] | first }}", "No first item, sequence was empty."),
        ('{{ {"a": 1}.update({}) }}', "access to attribute 'update' of 'dict' object is unsafe"),
        ("{{ item.text * 100000000 }}", "repetition result is too large"),
    ],
)
def test_what_the_template_writes_itself_is_still_said(pool, template, says):
    """A typo in a field name, a comparison of a text with a number: the key and the types
    are the author's, and the message names them as before."""
    for render_item in (lambda: render(template, ITEM), lambda: pool.render([template], ITEM)):
        with pytest.raises(TemplateProblem) as caught:
            render_item()
        assert says in str(caught.value)


def test_a_plain_template_that_misses_a_field_says_it_as_jinja_does():
    with pytest.raises(TemplateProblem, match="has no attribute 'nope'"):
        render_plain("{{ item.nope }}", ITEM)
