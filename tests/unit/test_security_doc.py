"""docs/security.md names, for each defence, the test that shows it: every test it names
must exist, so the threat model cannot point at a test that was renamed or removed."""

from __future__ import annotations

import ast
import re
from functools import lru_cache

from support.cli import ROOT

REFERENCE = re.compile(r"`((?:[\w/]+/)?(test_\w+\.py))?::(test_\w+)(?:\[[^\]`]*\])?`")


@lru_cache
def functions_of(file_name: str) -> frozenset[str]:
    found = list((ROOT / "tests").rglob(file_name))
    assert len(found) == 1, f"{file_name}: {len(found)} files of that name under tests/"
    tree = ast.parse(found[0].read_text(encoding="utf-8"))
    return frozenset(node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef))


def named_tests(text: str) -> list[tuple[str, str]]:
    """(file name, test) for each `file.py::test` reference; `::test` alone is of the file
    named last before it."""
    current, named = None, []
    for match in REFERENCE.finditer(text):
        current = match.group(2) or current
        assert current, f"{match.group(0)} names no file before it"
        named.append((current, match.group(3)))
    return named


def test_every_test_the_threat_model_names_exists():
    named = named_tests((ROOT / "docs" / "security.md").read_text(encoding="utf-8"))
    assert len(named) > 50
    missing = [f"{file}::{test}" for file, test in named if test not in functions_of(file)]
    assert missing == []


def test_a_renamed_test_is_caught():
    assert named_tests("`tests/unit/test_spec.py::test_bad_fields`, `::test_no_such_test`") == [
        ("test_spec.py", "test_bad_fields"),
        ("test_spec.py", "test_no_such_test"),
    ]
    assert "test_no_such_test" not in functions_of("test_spec.py")
