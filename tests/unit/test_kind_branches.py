"""A decision kind is one module (``gate/kinds/``): outside that package no file of gate/ or
workers/ asks which kind of decision it has. It asks the kind (``kind_of(decision).read``,
``.figures``, ``.counts_by_label``, ...). What counts as asking which kind, read from the
AST of every module:

* a comparison with a decision type's name (``decision.type == "json"``, ``.get("type") in
  ("fields", "judge")``), and any read of ``<...>decision.type``;
* ``<...>decision.judge is not None``, ``<...>decision.fields is None`` (the parsed rule's
  parts standing for its kind);
* ``isinstance(x, SomethingRule)`` and ``case SomethingRule(...)``;
* the capability flags that stand for a kind's name: a call of ``rule_of``, ``run_is_judged``
  or ``is_judged`` (or a function so named), ``metrics["fields"]``, ``metrics["judge"]``.

At most three files outside the package may do so (``ALLOWED``, each with why)."""

from __future__ import annotations

import ast

from support.cli import ROOT

DECISION_TYPES = {"first_word", "json", "regex", "fields", "judge", "tool_call"}
FLAGS = {"rule_of", "run_is_judged", "is_judged"}
RULE_PARTS = {"judge", "fields"}
KINDS_PACKAGE = ROOT / "gate" / "kinds"

# file -> why it may branch on a kind (at most three)
ALLOWED: dict[str, str] = {}


def _names_a_type(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in DECISION_TYPES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_type(e) for e in node.elts)
    return False


def _reads_a_type(node: ast.AST) -> bool:
    """A decision's type, or a decision: ``x.type``, ``x.get("type")``, ``x["type"]``, ``decision``."""
    text = ast.unparse(node)
    return not _names_a_type(node) and (".type" in text or "'type'" in text or "decision" in text)


def _is_rule_class(node: ast.AST) -> bool:
    if isinstance(node, ast.Tuple):
        return any(_is_rule_class(e) for e in node.elts)
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name.endswith("Rule")


def _called(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _branch(node: ast.AST) -> str | None:
    """What ``node`` asks of the decision's kind, or None."""
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        if any(_names_a_type(s) for s in sides) and any(_reads_a_type(s) for s in sides):
            return "compares with a decision type's name"
        if any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops) and any(
            isinstance(s, ast.Attribute) and s.attr in RULE_PARTS and ast.unparse(s.value).endswith("decision")
            for s in sides
        ):
            return "tests the decision's rule parts for None"
    if isinstance(node, ast.Attribute) and node.attr == "type" and ast.unparse(node.value).endswith("decision"):
        return "reads decision.type"
    if isinstance(node, ast.Call):
        if _called(node) == "isinstance" and len(node.args) == 2 and _is_rule_class(node.args[1]):
            return "isinstance of a rule class"
        if _called(node) in FLAGS:
            return f"calls {_called(node)}"
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in FLAGS:
        return f"defines {node.name}"
    if isinstance(node, ast.match_case) and isinstance(node.pattern, ast.MatchClass):
        if _is_rule_class(node.pattern.cls):
            return "matches a rule class"
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in RULE_PARTS:
        if ast.unparse(node.value).endswith("metrics"):
            return f'reads metrics["{node.slice.value}"]'
    return None


def kind_branches(source: str) -> list[str]:
    """Each place (line: what) the source asks which kind of decision it has."""
    found = []
    for node in ast.walk(ast.parse(source)):
        what = _branch(node)
        if what is not None:
            found.append(f"{getattr(node, 'lineno', getattr(getattr(node, 'pattern', None), 'lineno', 0))}: {what}")
    return sorted(found, key=lambda s: int(s.split(":")[0]))


def branching_files() -> dict[str, list[str]]:
    found = {}
    for package in ("gate", "workers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if KINDS_PACKAGE in path.parents:
                continue
            branches = kind_branches(path.read_text())
            if branches:
                found[str(path.relative_to(ROOT))] = branches
    return found


def test_only_the_kinds_package_branches_on_a_decision_kind():
    found = branching_files()
    assert len(ALLOWED) <= 3
    assert {f: b for f, b in found.items() if f not in ALLOWED} == {}


def test_every_allowed_file_still_needs_it():
    found = branching_files()
    assert [f for f in ALLOWED if f not in found] == []


def test_a_branch_on_a_kind_is_found():
    source = """
if spec.decision.type == "tool_call":
    pass
if (config.get("decision") or {}).get("type") in ("fields", "judge"):
    pass
if spec.decision.judge is not None or run.pinned.decision.fields is None:
    pass
if isinstance(rule, CallRule):
    pass
match rule:
    case CallRule():
        pass
rule = rule_of(run.pinned.decision)
def run_is_judged(run):
    return bool(run.pinned.judge)
metrics["fields"] = 1
x = run.metrics["judge"]
"""
    assert kind_branches(source) == [
        "2: compares with a decision type's name",
        "2: reads decision.type",
        "4: compares with a decision type's name",
        "6: tests the decision's rule parts for None",
        "6: tests the decision's rule parts for None",
        "8: isinstance of a rule class",
        "11: matches a rule class",
        "13: calls rule_of",
        "14: defines run_is_judged",
        '16: reads metrics["fields"]',
        '17: reads metrics["judge"]',
    ]


def test_what_is_not_a_kind_is_not_found():
    source = """
if f.type == "label":  # a field's comparator
    pass
if fmt == "json" or spec.kind == "judge" or "fields" in pinned:  # a format, a prompt's kind, a key
    pass
if version.fields is not None:  # a dataset version's field counts
    pass
if isinstance(rule, Mapping):
    pass
counts = metrics["calls"]
"""
    assert kind_branches(source) == []
