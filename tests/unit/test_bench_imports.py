"""The benchmarks import the gate's functions inside their own functions (a bench's start
stays cheap), so a rename in ``gate/`` breaks a bench only when it runs, minutes into
`make bench`: P10's EXPLAIN step imported a function from the module it had left. Every
``from gate… import name`` and ``from workers… import name`` in bench/ must name something
that module has."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _imports(path: Path) -> list[tuple[str, str, int]]:
    tree = ast.parse(path.read_text(), str(path))
    return [
        (node.module, alias.name, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("gate", "workers")
        for alias in node.names
    ]


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.py")), ids=lambda p: p.name)
def test_every_name_a_bench_imports_from_the_gate_exists(path):
    missing = [
        f"{path.name}:{line}: {module} has no {name}" for module, name, line in _imports(path) if not _has(module, name)
    ]
    assert not missing, missing


def _has(module: str, name: str) -> bool:
    """The module has ``name``, or is a package with a submodule of that name."""
    found = importlib.import_module(module)
    return hasattr(found, name) or (
        hasattr(found, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None
    )
