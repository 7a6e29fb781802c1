"""JSON Schemas a prompt file brings (a tool's parameters, a strict response format): what the
gate accepts when it reads the file, and what checking a model's answer against one may cost.
A schema comes from a pull request and an answer from a model: the hostile cases run in a
child process with a deadline, since the library's own ``pattern`` (Python's backtracking
``re``), pairwise ``uniqueItems`` and unmetered branching would hold the GIL for minutes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
from support.cli import ROOT

from gate.errors import SpecError
from gate.prompt.json_schema import MAX_DEPTH, MAX_NODES, answer_problem, check_schema

ORDER = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "pattern": "^ORD-[0-9]+$"}, "amount": {"type": "number"}},
    "required": ["order_id", "amount"],
    "additionalProperties": False,
}


def test_an_answer_that_fits_has_no_problem_and_one_that_does_not_says_where():
    schema = check_schema(ORDER, "tools[0].parameters", "p.yaml")
    assert answer_problem(schema, {"order_id": "ORD-1", "amount": 2.5}) is None
    assert answer_problem(schema, {"order_id": "ORD-1", "amount": "2.5"}) == "amount: '2.5' is not of type 'number'"
    assert answer_problem(schema, {"order_id": "ORD-1"}) == "'amount' is a required property"
    assert answer_problem(schema, {"order_id": "X", "amount": 1}).startswith("order_id: 'X' does not match")


@pytest.mark.parametrize(
    "schema, problem",
    [
        (
            {"$ref": "https://evil.example/s.json"},
            r"\.\$ref: 'https://evil.example/s.json' is not a part of this schema",
        ),
        ({"$ref": "#/$defs/nowhere"}, r"\.\$ref: '#/\$defs/nowhere' is not a part of this schema"),
        ({"$id": "https://evil.example/"}, r"\.\$id: is not supported"),
        ({"properties": {"a": {"$dynamicRef": "#x"}}}, r"\.properties\.a\.\$dynamicRef: is not supported"),
        ({"patternProperties": {"^(a+)+$": {}}}, r"\.patternProperties: is not supported"),
        ({"properties": {"a": {"pattern": "(?<=x)y"}}}, r"\.properties\.a\.pattern: invalid pattern"),
        ({"type": "nope"}, r": is not a valid JSON Schema at type"),
        (
            {"$schema": "http://json-schema.org/draft-07/schema#"},
            r"\.\$schema: the gate checks JSON Schema draft 2020-12",
        ),
        ([], r": must be a JSON Schema: a mapping"),
    ],
)
def test_a_schema_the_gate_cannot_check_is_refused_in_one_line(schema, problem):
    with pytest.raises(SpecError, match=r"^p\.yaml: tools\[0\]\.parameters" + problem) as caught:
        check_schema(schema, "tools[0].parameters", "p.yaml")
    assert "\n" not in str(caught.value)


def test_a_schema_too_deep_or_too_large_is_refused_before_the_library_reads_it():
    deep: dict = {"type": "object"}
    for _ in range(MAX_DEPTH):
        deep = {"type": "object", "properties": {"a": deep}}
    with pytest.raises(SpecError, match=f"nests deeper than {MAX_DEPTH} levels"):
        check_schema(deep, "s", None)
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(MAX_NODES)}}
    started = time.perf_counter()
    with pytest.raises(SpecError, match=f"has more than {MAX_NODES} values"):
        check_schema(wide, "s", None)
    assert time.perf_counter() - started < 1.0


def test_a_local_reference_and_a_recursive_schema_are_checked():
    tree = check_schema(
        {
            "$defs": {
                "node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}
            },
            "$ref": "#/$defs/node",
        },
        "s",
        None,
    )
    assert answer_problem(tree, {"kids": [{"kids": []}]}) is None
    assert answer_problem(tree, {"kids": [{"kids": 3}]}) == "kids/0/kids: 3 is not of type 'array'"


def _deadline(code: str, seconds: float = 20.0) -> str:
    """Run ``code`` in a child process and return its output; a child still running after
    ``seconds`` fails the test (the cost was not bounded)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=seconds,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"checking the answer took more than {seconds} s")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_backtracking_pattern_costs_linear_time_on_a_long_answer():
    out = _deadline(
        """
        import time
        from gate.prompt.json_schema import answer_problem, check_schema
        text = {"type": "string", "pattern": "^(a+)+$"}
        schema = check_schema({"type": "object", "properties": {"a": text}}, "s", None)
        started = time.perf_counter()
        problem = answer_problem(schema, {"a": "a" * 30000 + "!"})
        print(round(time.perf_counter() - started, 3), problem[:4])
        """
    )
    seconds, start = out.rstrip("\n").split(" ", 1)
    assert float(seconds) < 0.5 and start == "a: '"


def test_a_schema_that_branches_at_every_level_is_stopped_by_its_step_budget():
    out = _deadline(
        """
        import time
        from gate.prompt.json_schema import answer_problem, check_schema
        twice = [{"items": {"$ref": "#"}}, {"items": {"$ref": "#"}}]
        schema = check_schema({"type": "array", "anyOf": twice}, "s", None)
        value = "leaf"
        for _ in range(30):
            value = [value]
        started = time.perf_counter()
        problem = answer_problem(schema, value)
        print(round(time.perf_counter() - started, 3), problem)
        """
    )
    seconds, problem = out.split(" ", 1)
    assert float(seconds) < 2.0 and problem.startswith("too costly to check")


def test_unique_items_over_a_long_mixed_list_costs_linear_time():
    out = _deadline(
        """
        import time
        from gate.prompt.json_schema import answer_problem, check_schema
        schema = check_schema({"type": "array", "uniqueItems": True}, "s", None)
        value = [i if i % 2 else str(i) for i in range(12000)]
        started = time.perf_counter()
        fine = answer_problem(schema, value)
        twice = answer_problem(schema, value + [1.0])
        print(round(time.perf_counter() - started, 3), fine, twice[:26])
        """
    )
    seconds, fine, twice = out.split(" ", 2)
    assert float(seconds) < 2.0 and fine == "None" and twice.strip() == "has non-unique elements (1"


def test_unique_items_keeps_json_schema_equality():
    schema = check_schema({"type": "array", "uniqueItems": True}, "s", None)
    assert answer_problem(schema, [1, True, "1", {"a": 1}, {"a": True}]) is None
    assert answer_problem(schema, [{"a": 1, "b": 2}, {"b": 2, "a": 1.0}]) is not None
