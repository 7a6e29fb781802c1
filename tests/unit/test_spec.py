"""The prompt YAML format: every field, the refusals, the template sandbox, and the JSON
Schema shipped with the package (checked against the example prompts)."""

import copy
import dataclasses
import json

import jsonschema
import pytest
from support.cli import ROOT

from gate.errors import SpecError
from gate.prompt.spec import Decision, Message, load_spec, parse_spec, parse_spec_text
from gate.prompt.templating import TemplateProblem, check_template, render

SCHEMA = json.loads((ROOT / "gate" / "schemas" / "prompt.schema.json").read_text())
EXAMPLE_PROMPTS = sorted((ROOT / "prompts-example").glob("**/*.yaml"))
EXAMPLE_PROMPTS = [p for p in EXAMPLE_PROMPTS if p.name != "gate.yaml"]

FULL = """
name: ticket-urgency
description: Is the ticket urgent?
model: gpt-4o-mini
params:
  temperature: 0
  top_p: 1
  max_tokens: 5
  max_completion_tokens: 6
  seed: 7
  stop: "\\n"
  frequency_penalty: 0.5
  presence_penalty: -0.5
  n: 1
  logit_bias: {"1234": -100}
  reasoning_effort: low
messages:
  - role: system
    content: Answer urgent or routine.
  - role: developer
    content: Be brief.
  - role: assistant
    content: Understood.
  - role: user
    content: "Subject: {{ item.subject }}\\n{{ item.text | upper }}"
labels: [urgent, routine]
decision: {type: json, field: result.label}
response_format: {type: json_object}
provider: local-llm
"""


def minimal(**extra):
    data = {"name": "p", "model": "m", "messages": [{"role": "user", "content": "{{ item.text }}"}]}
    data.update(extra)
    return data


def refused(data, field=None):
    with pytest.raises(SpecError) as info:
        parse_spec(data, file="p.yaml")
    if field is not None:
        assert info.value.field == field, str(info.value)
    assert info.value.file == "p.yaml"
    return info.value


# ----------------------------------------------------------------------------- fields


def test_every_field():
    spec = parse_spec_text(FULL, file="x.yaml")
    assert spec.name == "ticket-urgency"
    assert spec.description == "Is the ticket urgent?"
    assert spec.model == "gpt-4o-mini"
    assert dict(spec.params) == {
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 5,
        "max_completion_tokens": 6,
        "seed": 7,
        "stop": ("\n",),
        "frequency_penalty": 0.5,
        "presence_penalty": -0.5,
        "n": 1,
        "logit_bias": spec.params["logit_bias"],
        "reasoning_effort": "low",
    }
    assert dict(spec.params["logit_bias"]) == {"1234": -100}
    assert isinstance(spec.params["temperature"], float)
    assert [m.role for m in spec.messages] == ["system", "developer", "assistant", "user"]
    assert spec.messages[0] == Message("system", "Answer urgent or routine.")
    assert spec.labels == ("urgent", "routine")
    assert spec.decision == Decision("json", field="result.label")
    assert dict(spec.response_format) == {"type": "json_object"}
    assert spec.provider == "local-llm"


def test_defaults():
    spec = parse_spec(minimal())
    assert spec.labels == ("yes", "no")
    assert spec.decision == Decision("first_word")
    assert spec.description == "" and dict(spec.params) == {}
    assert spec.response_format is None and spec.provider is None


def test_config_round_trip_and_hash():
    spec = parse_spec_text(FULL)
    config = spec.to_config()
    assert json.loads(json.dumps(config)) == config  # JSON-able, as stored
    again = parse_spec(config)
    assert again == spec and again.config_hash == spec.config_hash
    other = parse_spec(dict(config, description="changed"))
    assert other.config_hash != spec.config_hash


def test_spec_is_frozen():
    spec = parse_spec(minimal(params={"temperature": 0.2}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.model = "other"
    with pytest.raises(TypeError):
        spec.params["temperature"] = 1.0


@pytest.mark.parametrize(
    "decision, expected",
    [
        (None, Decision()),
        ("first_word", Decision()),
        ("first-word", Decision()),
        ("json", Decision("json", field="decision")),
        ({"type": "json"}, Decision("json", field="decision")),
        ({"type": "json", "field": "a.b"}, Decision("json", field="a.b")),
        ({"type": "regex", "pattern": r"Answer: (\w+)"}, Decision("regex", pattern=r"Answer: (\w+)")),
    ],
)
def test_decision_forms(decision, expected):
    assert parse_spec(minimal(decision=decision)).decision == expected


def test_stop_string_becomes_a_list():
    assert parse_spec(minimal(params={"stop": "END"})).params["stop"] == ("END",)


def test_load_spec_from_file(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(FULL)
    assert load_spec(path).name == "ticket-urgency"
    with pytest.raises(SpecError, match="no such file"):
        load_spec(tmp_path / "missing.yaml")


# ----------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "data, field",
    [
        (minimal(temprature=0.1), "temprature"),
        (minimal(params={"temprature": 0.1}), "params.temprature"),
        (minimal(messages=[{"role": "user", "content": "x", "name": "bob"}]), "messages[0].name"),
        (minimal(decision={"type": "json", "path": "x"}), "decision.path"),
        (minimal(provider={"base_url": "http://x", "api_key": "sk-123"}), "provider"),
    ],
)
def test_unknown_fields_are_named(data, field):
    err = refused(data, field)
    assert field.split(".")[-1].split("]")[-1] in str(err)


@pytest.mark.parametrize(
    "labels",
    [
        ["yes"],
        [],
        "yes",
        ["yes", "Yes"],
        ["yes", ""],
        ["yes", " no"],
        ["yes", 3],
        ["yes", None],
        ["a" * 129, "b"],
        {"yes": 1, "no": 2},
    ],
)
def test_bad_labels(labels):
    refused(minimal(labels=labels), "labels")


@pytest.mark.parametrize(
    "data, field",
    [
        ({"model": "m", "messages": [{"role": "user", "content": "x"}]}, "name"),
        (minimal(name="Ticket Urgency"), "name"),
        (minimal(name="-x"), "name"),
        (minimal(name="x" * 129), "name"),
        (minimal(name="ticket-urgency\n"), "name"),  # names match in full (a "$" anchor let it through)
        (minimal(model="gpt-4o-mini\n"), "model"),
        (minimal(params={"reasoning_effort": "low\n"}), "params.reasoning_effort"),
        (minimal(provider="azure-east\n"), "provider"),
        (minimal(model=""), "model"),
        (minimal(model="   "), "model"),
        (minimal(model=3), "model"),
        (minimal(messages=[]), "messages"),
        (minimal(messages="hi"), "messages"),
        (minimal(messages=["hi"]), "messages[0]"),
        (minimal(messages=[{"role": "tool", "content": "x"}]), "messages[0].role"),
        (minimal(messages=[{"role": "user", "content": "  "}]), "messages[0].content"),
        (minimal(messages=[{"role": "user"}]), "messages[0].content"),
        (minimal(description=5), "description"),
        (minimal(params="hot"), "params"),
        (minimal(params={"temperature": 3}), "params.temperature"),
        (minimal(params={"temperature": "0"}), "params.temperature"),
        (minimal(params={"temperature": True}), "params.temperature"),
        (minimal(params={"max_tokens": 0}), "params.max_tokens"),
        (minimal(params={"max_tokens": 1.5}), "params.max_tokens"),
        (minimal(params={"n": 2}), "params.n"),
        (minimal(params={"stop": [1]}), "params.stop"),
        (minimal(decision="vote"), "decision.type"),
        (minimal(decision=3), "decision"),
        (minimal(decision={"type": "regex"}), "decision.pattern"),
        (minimal(decision={"type": "regex", "pattern": "(unclosed"}), "decision.pattern"),
        (minimal(decision={"type": "json", "field": ""}), "decision.field"),
        (minimal(response_format="json"), "response_format"),
        (minimal(provider="Open AI"), "provider"),
        (minimal(provider={"api_key_env": "sk-abc def"}), "provider"),
        (minimal(provider={"base_url": 8000}), "provider"),
    ],
)
def test_bad_fields(data, field):
    refused(data, field)


def test_not_a_mapping_and_malformed_yaml():
    refused(["name", "p"])
    with pytest.raises(SpecError, match=r"malformed YAML: line \d+, column \d+"):
        parse_spec_text("name: p\nmodel: [unclosed\n")


# ----------------------------------------------------------------------------- templates


@pytest.mark.parametrize(
    "template",
    [
        "{{ item.text ",  # syntax
        "{% if item.x %}no end",
        "{{ other.text }}",  # only item is available
        "{{ config }}",
        "{% include 'other.txt' %}",
        "{% import 'macros' as m %}",
        "{% extends 'base' %}",
    ],
)
def test_bad_templates(template):
    err = refused(minimal(messages=[{"role": "user", "content": template}]), "messages[0].content")
    assert "template" in err.reason


SANDBOX_ESCAPES = [
    "{{ ''.__class__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ item.__class__.__mro__ }}",
    "{{ item['__class__'] }}",
    "{{ item.text.__class__.__base__ }}",
    "{{ [].__class__ }}",
    "{{ cycler.__init__.__globals__.os }}",
    "{{ joiner.__init__.__globals__ }}",
    "{{ lipsum.__globals__['os'].popen('id').read() }}",
    "{{ namespace.__init__.__globals__ }}",
    "{% set ns = namespace() %}{{ ns.__class__ }}",
    "{{ self.__init__.__globals__ }}",
]


@pytest.mark.parametrize("template", SANDBOX_ESCAPES + ["{{ item._private }}"])
def test_sandbox_escapes_are_refused_at_submit(template):
    err = refused(minimal(messages=[{"role": "user", "content": template}]), "messages[0].content")
    assert "private attribute" in err.reason or "only 'item'" in err.reason


@pytest.mark.parametrize(
    "template",
    SANDBOX_ESCAPES
    + [
        "{{ item|attr('__class__') }}",
        "{{ '{0.__class__}'.format(item) }}",
        "{{ item.update({'text': 'x'}) }}",
        "{{ item.pop('text') }}",
    ],
)
def test_sandbox_still_guards_rendering(template):
    with pytest.raises(TemplateProblem):
        render(template, {"text": "hi", "_private": 1})


def test_attr_filter_is_refused_at_submit():
    with pytest.raises(TemplateProblem):
        check_template("{{ item|attr('__class__') }}")


@pytest.mark.parametrize(
    "source",
    ["{{ namespace() }}", "{{ cycler(1) }}", "{{ lipsum() }}", "{% for i in range(3) %}{% endfor %}", "{{ joiner() }}"],
)
def test_jinja_globals_are_not_available(source):
    with pytest.raises(TemplateProblem, match="only 'item'"):
        check_template(source)


@pytest.mark.parametrize("source", ["{{ 'a' * 10**9 }}", "{{ [1] * 100000000 }}", "{{ 2 ** 100000 }}"])
def test_huge_results_are_refused_at_render(source):
    check_template(source)
    with pytest.raises(TemplateProblem, match="sandbox"):
        render(source, {})


def test_templates_render_item_fields():
    spec = parse_spec_text(FULL)
    assert (
        render(spec.messages[3].content, {"subject": "Down", "text": "site is down"}) == "Subject: Down\nSITE IS DOWN"
    )
    with pytest.raises(TemplateProblem, match="missing item field"):
        render(spec.messages[3].content, {"text": "no subject"})


# ----------------------------------------------------------------------------- JSON Schema


def schema_errors(doc):
    return list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(doc))


def test_schema_is_valid_draft_2020_12():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["additionalProperties"] is False


def test_schema_lists_exactly_the_spec_fields():
    from gate.prompt.call_settings import PARAMS
    from gate.prompt.spec import ROLES, TOP_FIELDS

    assert set(SCHEMA["properties"]) == set(TOP_FIELDS)
    assert set(SCHEMA["properties"]["params"]["properties"]) == set(PARAMS)
    assert SCHEMA["properties"]["messages"]["items"]["properties"]["role"]["enum"] == list(ROLES)


@pytest.mark.parametrize("path", EXAMPLE_PROMPTS, ids=lambda p: p.name)
def test_example_prompts_are_valid(path):
    import yaml

    assert schema_errors(yaml.safe_load(path.read_text())) == []
    spec = load_spec(path)
    assert spec.name in path.name


def test_examples_exist():
    names = {p.name for p in EXAMPLE_PROMPTS}
    assert {
        "ticket-urgency.yaml",
        "refund-eligibility.yaml",
        "ticket-urgency-v2.yaml",
        "ticket-urgency-v2-weak.yaml",
    } <= names


def test_full_example_is_valid_for_the_schema():
    import yaml

    assert schema_errors(yaml.safe_load(FULL)) == []


@pytest.mark.parametrize(
    "data",
    [
        minimal(temprature=0.1),
        minimal(params={"temprature": 0.1}),
        minimal(messages=[{"role": "user", "content": "x", "name": "bob"}]),
        minimal(decision={"type": "json", "path": "x"}),
        minimal(decision={"type": "regex"}),
        minimal(decision="vote"),
        minimal(provider={"api_key": "sk"}),
        minimal(provider={"api_key_env": "not a name"}),
        minimal(labels=["yes"]),
        minimal(labels=["yes", "yes"]),
        minimal(labels=["yes", " no"]),
        minimal(name="Bad Name"),
        minimal(name="ticket-urgency\n"),
        minimal(model="gpt-4o-mini\n"),
        minimal(model=""),
        minimal(messages=[]),
        minimal(messages=[{"role": "tool", "content": "x"}]),
        minimal(params={"temperature": 3}),
        minimal(params={"n": 2}),
        minimal(params={"max_tokens": 0}),
        {"model": "m", "messages": [{"role": "user", "content": "x"}]},
    ],
)
def test_schema_and_parser_refuse_alike(data):
    assert schema_errors(data), "the schema accepts it"
    refused(copy.deepcopy(data))
