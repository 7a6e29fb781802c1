"""The code's shape, kept as import-linter contracts keep it: the import graph of gate/ and
workers/ (every import, lazy ones in functions too) has no cycle, the layers import only
downwards, no module reaches for another's private names, and modules and functions stay
small enough to read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support.cli import ROOT

PACKAGES = ("gate", "workers")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
# (importer prefix, imported prefixes it must not use): the layers, lowest first
LAYERS = [
    ("gate.store", ("gate.service", "gate.cli", "gate.action", "workers")),
    ("gate.service", ("gate.cli", "gate.action", "gate.cli.demo", "workers")),
    # a role takes the engine and settings it uses, not the service (issue 28)
    ("workers", ("gate.service", "gate.cli", "gate.action", "gate.cli.demo")),
    ("gate.action", ("gate.cli",)),
]


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, list[str]]]:
    """(module imported, names imported from it) for every import in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            found.append((base, [alias.name for alias in node.names]))
    result = []
    for module, names in found:
        targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in known] or [module]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                result.append((target, names))
    return result


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: {t for t, _ in imports_of(name, path, known)} for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_cycle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("importer, forbidden", LAYERS, ids=[layer for layer, _ in LAYERS])
def test_layers_import_only_downwards(importer, forbidden):
    wrong = sorted(
        f"{src} -> {dst}"
        for src, targets in graph().items()
        if src.startswith(importer)
        for dst in targets
        if dst.startswith(forbidden)
    )
    assert wrong == []


def test_no_module_imports_another_modules_private_names():
    known = modules()
    wrong = []
    for name, path in known.items():
        for module, names in imports_of(name, path, known):
            wrong += [
                f"{name}: from {module} import {n}" for n in names if n.startswith("_") and not n.startswith("__")
            ]
    assert wrong == []


def test_modules_and_functions_stay_readable():
    too_long = []
    for name, path in modules().items():
        source = path.read_text()
        tree = ast.parse(source)
        lines = len(source.splitlines())
        if lines > MAX_MODULE_LINES and "one piece" not in (ast.get_docstring(tree) or ""):
            too_long.append(f"{name}: {lines} lines")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}.{node.name}: {length} lines")
    assert too_long == []
