"""Issue 50.2: what an import maps, and that nothing it does not map is dropped silently:
each skipped assert or grader is listed with its test and the reason; untrusted files get
one line; the written files are what the gate's own parsers read."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gate.cli import cli
from gate.errors import UsageError
from gate.imports.openai_evals import import_openai_evals
from gate.imports.promptfoo import import_promptfoo, mapped

CONFIG = """
description: Drafts
prompts: ["Reply to {{ticket}}", {raw: "Summarize {{ticket}}", label: summary}]
providers: [openai:chat:gpt-4o-mini, anthropic:messages:claude]
tests:
  - description: one
    vars: {ticket: hello, order_id: A-1}
    assert:
      - {type: contains, value: "{{order_id}}"}
      - {type: llm-rubric, value: is polite}
      - {type: python, value: "len(output) < 9"}
      - {type: similar, value: hi}
      - {type: not-is-json}
      - {type: contains, value: "{{ order_id | upper }}"}
      - {type: icontains, value: hello, transform: output.toLowerCase()}
  - description: two
    vars: {ticket: bye, order_id: A-2}
    assert: [{type: contains, value: "{{order_id}}"}, {type: factuality, value: x}]
  - description: only a rubric
    vars: {ticket: x}
    assert: [{type: llm-rubric, value: is polite}]
  - description: nothing that maps
    vars: {ticket: y}
    assert: [{type: javascript, value: "true"}]
    provider: openai:chat:other
scenarios: [{config: [{vars: {a: 1}}], tests: []}]
"""


def test_a_promptfoo_config_lists_every_assert_it_does_not_map(tmp_path):
    path = tmp_path / "promptfooconfig.yaml"
    path.write_text(CONFIG)
    bundle = import_promptfoo(path)
    assert sorted(bundle.prompts) == ["prompt", "summary"]
    assert bundle.prompts["prompt"]["messages"] == [{"role": "user", "content": "Reply to {{ item.ticket}}"}]
    assert bundle.prompts["summary"]["decision"] == {
        "type": "checks",
        "checks": {"contains_1": {"contains": {"column": "order_id"}}},
    }
    assert [r["item_id"] for r in bundle.datasets["drafts-tests"]] == ["one", "two"]
    lines = [s.line() for s in bundle.skipped]
    assert lines[0] == "scenarios: a top-level field: not read by the import"
    assert lines[1] == "providers[2]: anthropic:messages:claude: a prompt file names one model: the first's"
    assert "tests[4] (nothing that maps): provider: a test's field not read by the import" in lines
    assert "tests[1] (one): assert[3] (python): code: the gate runs no code from a config (a check is data)" in lines
    assert any(line.startswith("tests[1] (one): assert[4] (similar): embedding similarity") for line in lines)
    assert any(line.startswith("tests[1] (one): assert[5] (not-is-json):") for line in lines)
    assert any(line.startswith("tests[1] (one): assert[6] (contains): its value is not a text") for line in lines)
    assert any(line.startswith("tests[1] (one): assert[7] (icontains): its transform is code") for line in lines)
    assert any(line.startswith("tests[2] (two): assert[2] (factuality): model-graded") for line in lines)
    assert "tests[4] (nothing that maps): the test: no assert the gate can check: not imported" in lines
    rubric = next(line for line in lines if "llm-rubric" in line)
    assert rubric.startswith("tests[1] (one), tests[3] (only a rubric): llm-rubric → judges/rubric-judge-1.yaml")
    assert "needs a human-labelled dataset" in rubric
    written = bundle.write(tmp_path / "out")
    assert {p.name for p in written} >= {"gate.yaml", "IMPORT.txt", "rubric-judge-1.yaml", "drafts-tests.jsonl"}
    with pytest.raises(UsageError, match="gate.yaml exists"):
        bundle.write(tmp_path / "out")


@pytest.mark.parametrize(
    ("assertion", "found"),
    [
        ({"type": "contains-any", "value": "a, b.c"}, [("regex", "a|b\\.c")]),
        ({"type": "icontains-all", "value": ["x", "y"]}, [("icontains", "x"), ("icontains", "y")]),
        ({"type": "not-regex", "value": "x+"}, [("not_regex", "x+")]),
        ({"type": "not-starts-with", "value": "No"}, [("not_starts_with", "No")]),
        (
            {"type": "is-json", "value": {"type": "object"}},
            "a JSON schema is not a check the gate has",
        ),
        (
            {"type": "cost", "threshold": 0.1},
            "the mapping's bar max_cost_per_1k_items bounds cost per 1,000 items instead",
        ),
        ({"type": "brand-new"}, "brand-new: no gate check for this assert type"),
        ("junk", "not an assert (a mapping with a type)"),
    ],
)
def test_an_assert_maps_to_checks_or_says_why_not(assertion, found):
    assert mapped(assertion, {}) == found


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("a: [1, 2", "promptfooconfig.yaml"),
        ("- 1\n- 2\n", "not a promptfoo config"),
        ("prompts: [1]\n", "prompts: none the gate can import"),
        ("a: &x [1]\nb: *x\n", "promptfooconfig.yaml"),
    ],
)
def test_a_bad_promptfoo_config_is_one_line(tmp_path, text, why):
    path = tmp_path / "promptfooconfig.yaml"
    path.write_text(text)
    with pytest.raises(UsageError) as refused:
        import_promptfoo(path)
    assert why in str(refused.value) and "\n" not in str(refused.value)


def test_an_openai_export_needs_its_data_and_bad_lines_are_one_line(tmp_path):
    export = tmp_path / "eval.json"
    export.write_text(json.dumps({"name": "e", "testing_criteria": []}))
    with pytest.raises(UsageError, match="give its data too"):
        import_openai_evals(export)
    samples = tmp_path / "s.jsonl"
    samples.write_text('{"input": "hi", "ideal": "yes"}\n{nope\n')
    with pytest.raises(UsageError, match=r"s.jsonl: line 2: not JSON$"):
        import_openai_evals(samples)


def test_promptfoo_tests_from_a_csv_file(tmp_path):
    (tmp_path / "tests.csv").write_text(
        "ticket,order_id,__expected1,__expected2,__description\n"
        "I was charged,O-1,contains: {{order_id}},not-icontains: guarantee,refund one\n"
        "hello,O-2,is-json,grade: is polite,json one\n"
    )
    path = tmp_path / "promptfooconfig.yaml"
    path.write_text(
        'prompts: ["Reply to {{ticket}}"]\nproviders: [openai:chat:m]\ntests: [file://tests.csv, file://gen.py]\n'
    )
    bundle = import_promptfoo(path)
    checks = [p["decision"]["checks"] for p in bundle.prompts.values()]
    assert checks == [
        {"contains_1": {"contains": {"column": "order_id"}}, "not_icontains_1": {"not_icontains": "guarantee"}},
        {"is_json_1": {"is_json": True}},
    ]
    assert [s.what for s in bundle.skipped] == ["file://gen.py", "llm-rubric → judges/rubric-judge-1.yaml"]


def test_the_import_command_writes_and_lists(tmp_path):
    path = tmp_path / "promptfooconfig.yaml"
    path.write_text(CONFIG)
    result = CliRunner().invoke(cli, ["import", "promptfoo", str(path), "--to", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "not imported (12):" in result.output and "wrote 6 files into" in result.output
    again = CliRunner().invoke(cli, ["import", "promptfoo", str(path), "--to", str(tmp_path / "out")])
    assert again.exit_code == 2 and "gate.yaml exists" in again.output
