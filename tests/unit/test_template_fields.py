"""What a submission must satisfy besides a valid prompt file (issue 23, items 6 and 8):
the item fields a template reads, named from its syntax tree (every access form; a
dynamic one refused), how a version's rows are counted per field, the labels the decision
step would read as one, and the gate config's optional_fields section."""

from __future__ import annotations

import pytest

from gate.datasets.field_counts import MAX_FIELDS, FieldCounter, rows_having
from gate.domain.admission import check_labels, fields_read
from gate.errors import SpecError
from gate.gateconfig import parse_config
from gate.kinds.label import parse_decision
from gate.prompt.decision import label_key, same_reading
from gate.prompt.spec import parse_spec
from gate.prompt.template_fields import DynamicAccess, template_fields


@pytest.mark.parametrize(
    "template, fields",
    [
        ("{{ item.text }}", ("text",)),
        ("{{ item['text'] }}", ("text",)),
        ('{{ item["text"] }}', ("text",)),
        ("{{ item.get('text') }}", ("text",)),
        ("{{ item.get('tier', 'basic') }}", ("tier",)),
        ("{{ item.get('tier', item.plan) }}", ("plan", "tier")),  # the default reads a field too
        ("{% if 'tier' in item %}x{% endif %}", ("tier",)),
        ("{% if 'tier' not in item %}x{% endif %}", ("tier",)),
        (
            "{% if item.account_tier is defined %}{{ item.account_tier }}{% else %}{{ item.text }}{% endif %}",
            ("account_tier", "text"),
        ),
        ("{% if item.tier is not defined %}x{% endif %}", ("tier",)),
        ("{{ item.tier | default('basic') }}", ("tier",)),
        ("{{ item.tier | default(item.plan) | upper }}", ("plan", "tier")),
        ("{% for line in item.lines %}{{ line }} {{ item.sep }}{% endfor %}", ("lines", "sep")),
        ("{% if item.n > 3 %}{% if item.big %}B{% endif %}{% elif item.small %}s{% endif %}", ("big", "n", "small")),
        ("{{ item.a.b.c }} {{ item['d'][0] }} {{ item.e['f'] }}", ("a", "d", "e")),  # top-level fields
        ("{% set x = item.order_age_days | int %}{{ x }}", ("order_age_days",)),
        ("{% macro m(v) %}{{ v }} {{ item.inside }}{% endmacro %}{{ m(item.outside) }}", ("inside", "outside")),
        ("{{ item.text if item.text else item.subject }}", ("subject", "text")),
        ("Plain text, no item.", ()),
    ],
)
def test_each_access_form_names_its_field(template, fields):
    assert template_fields([template]) == fields


def test_fields_of_every_message_together():
    assert template_fields(["{{ item.subject }}", "{{ item.text }}", "{{ item.subject }}"]) == ("subject", "text")


@pytest.mark.parametrize(
    "template, why",
    [
        ("{{ item[key] }}", "item[...] with a computed key"),
        ("{{ item[item.k] }}", "item[...] with a computed key"),
        ("{{ item[0] }}", "item[...] with a computed key"),
        ("{% for k in ['a', 'b'] %}{{ item[k] }}{% endfor %}", "item[...] with a computed key"),
        ("{{ item.get(item.k) }}", "item.get with a computed key"),
        ("{{ item.get() }}", "item.get with a computed key"),
        ("{{ item.get('a', 'b', 'c') }}", "item.get with a computed key"),
        ("{% if item.k in item %}x{% endif %}", "'... in item' with a computed key"),
        ("{{ item }}", "the whole item"),
        ("{{ item | tojson }}", "the whole item"),
        ("{{ item | length }}", "the whole item"),
        ("{{ item | dictsort }}", "the whole item"),
        ("{% for k in item %}{{ k }}{% endfor %}", "the whole item"),
        ("{% set it = item %}{{ it.tier }}", "the whole item"),  # an alias would hide the reads
        ("{% macro m(i) %}{{ i.tier }}{% endmacro %}{{ m(item) }}", "the whole item"),
        ("{% if item %}x{% endif %}", "the whole item"),
        ("{{ item == item }}", "the whole item"),
        ("{% for k, v in item.items() %}{{ k }}{% endfor %}", "item.items"),
        ("{{ item.keys() }}", "item.keys"),
        ("{{ item.values }}", "item.values"),
        ("{{ item.pop('text') }}", "item.pop"),
        ("{% for item in item.rows %}{{ item }}{% endfor %}", "assigns to item"),
    ],
)
def test_a_dynamic_access_is_refused_in_one_line(template, why):
    with pytest.raises(DynamicAccess) as refused:
        template_fields([template])
    assert why in str(refused.value) and "\n" not in str(refused.value)


def test_a_spec_with_a_dynamic_access_is_refused_at_submit_naming_messages():
    spec = parse_spec({"name": "p1", "model": "m", "messages": [{"role": "user", "content": "{{ item[item.k] }}"}]})
    with pytest.raises(SpecError, match=r"^messages: template reads item\[...\] with a computed key"):
        fields_read(spec)


def test_rows_are_counted_per_field_with_a_value():
    counter = FieldCounter()
    for row in ({"text": "a", "tier": "gold"}, {"text": "b", "tier": None}, {"text": "", "tier": "x"}, {"text": "c"}):
        counter.add(row)
    counted = counter.to_json()
    assert counted == {"counts": {"text": 3, "tier": 2}, "rows": 4, "capped": False}
    assert rows_having(counted, "tier") == 2 and rows_having(counted, "account_tier") == 0


def test_field_names_are_bounded_and_an_uncounted_one_is_unknown_not_absent():
    counter = FieldCounter()
    counter.add({f"f{i}": 1 for i in range(MAX_FIELDS + 5)})
    counter.add({"x" * 500: 1})
    counted = counter.to_json()
    assert len(counted["counts"]) == MAX_FIELDS and counted["capped"] is True
    assert rows_having(counted, "f0") == 1
    assert rows_having(counted, f"f{MAX_FIELDS + 1}") is None  # not counted: unknown, never covered


@pytest.mark.parametrize(
    "labels, pair",
    [
        (["eligible", "not eligible", "not-eligible"], ("not eligible", "not-eligible")),
        (["eligible", "not_eligible", "Not Eligible"], ("not_eligible", "Not Eligible")),
        (["yes", "**Yes**"], ("yes", "**Yes**")),
        (["yes", "yes."], ("yes", "yes.")),
        (["urgent", '"urgent"', "routine"], ("urgent", '"urgent"')),
        (["yes", "..."], ("...", "...")),
        (["yes", "no", "not eligible", "eligible"], None),
    ],
)
def test_labels_read_as_one_are_found_by_the_decision_steps_own_reading(labels, pair):
    assert same_reading(labels) == pair


def test_the_pair_refused_is_really_one_label_to_the_decision_step():
    """The refusal is the decision step's own reading: an answer naming the second label
    of a refused pair is read as the first."""
    labels = ["eligible", "not eligible", "not-eligible"]
    assert label_key("not eligible") == label_key("**Not-Eligible.**")
    assert (
        parse_decision(
            parse_spec({"name": "p", "model": "m", "labels": labels, "messages": [{"role": "user", "content": "x"}]}),
            None,
            "not-eligible",
        )
        == "not eligible"
    )


def test_check_labels_names_both():
    spec = parse_spec(
        {
            "name": "p",
            "model": "m",
            "labels": ["eligible", "not eligible", "not-eligible"],
            "messages": [{"role": "user", "content": "x"}],
        }
    )
    with pytest.raises(SpecError, match=r"^labels: 'not eligible' and 'not-eligible' are read as the same label"):
        check_labels(spec)
    check_labels(parse_spec({"name": "p", "model": "m", "messages": [{"role": "user", "content": "x"}]}))


def test_optional_fields_in_a_gate_config():
    cfg = parse_config({"optional_fields": {"ticket-urgency": ["tier", "account_tier"], "other": []}})
    assert cfg.optional_fields == {"ticket-urgency": ("account_tier", "tier")}


@pytest.mark.parametrize(
    "section, field",
    [
        ({"Ticket Urgency": ["x"]}, "optional_fields.Ticket Urgency"),
        ({"ticket-urgency\n": ["x"]}, "optional_fields.ticket-urgency\n"),
        ({"p": "account_tier"}, "optional_fields.p"),
        ({"p": ["a", "a"]}, "optional_fields.p"),
        ({"p": [""]}, "optional_fields.p"),
        ({"p": [3]}, "optional_fields.p"),
        ({"p": ["a\nb"]}, "optional_fields.p"),
        ({"p": ["f"] * 101}, "optional_fields.p"),
        (["p"], "optional_fields"),
    ],
)
def test_bad_optional_fields_are_refused_naming_the_field(section, field):
    with pytest.raises(SpecError) as refused:
        parse_config({"optional_fields": section}, file="gate.yaml")
    assert refused.value.field == field
