"""The code's shape, kept as import-linter contracts keep it: the import graph of gate/ and
workers/ (every import, lazy ones in functions too) has no cycle; the packages stand on
floors and import only from their own floor and the ones below (``FLOORS``); a third-party
library is imported only by the packages that are about it (``LIBRARIES``); no module
reaches for another's private names; ``gate/`` keeps few modules at its top; every package
says what it holds; modules and functions stay small enough to read. docs/architecture.md's
layers table is held to ``FLOORS`` and ``LIBRARIES`` (tests/unit/test_architecture_doc.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support.cli import ROOT

PACKAGES = ("gate", "workers")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
MAX_TOP_MODULES = 12  # gate/*.py: only what everything stands on

# The floors, lowest first: a module imports only modules of its own floor or a lower one.
# (floor, module prefixes on it)
FLOORS = [
    ("foundation", ("gate.errors", "gate.states", "gate.untrusted", "gate.settings", "gate.records")),
    ("prompt", ("gate.prompt",)),
    ("verdict", ("gate.verdict",)),
    ("rollout", ("gate.rollout",)),
    ("kinds", ("gate.kinds",)),
    # the prompt file read whole, its answers read and its runs pinned: each asks the decision's kind
    ("prompt file", ("gate.prompt.spec", "gate.prompt.answer_reading", "gate.prompt.request_keys")),
    ("report", ("gate.report",)),
    ("calls", ("gate.calls",)),
    ("mockllm", ("gate.mockllm",)),
    ("database", ("gate.db", "gate.mysql_tls")),
    ("store", ("gate.store",)),
    ("datasets", ("gate.datasets",)),
    ("ratelimit", ("gate.ratelimit",)),
    ("gateconfig", ("gate.gateconfig",)),
    ("imports", ("gate.imports",)),
    ("contract", ("gate.contract",)),
    ("client", ("gate.client",)),
    ("workers", ("workers",)),
    ("domain", ("gate.domain",)),
    ("runtime", ("gate.runtime", "gate.production")),
    ("service", ("gate.service", "gate.schemas")),
    ("action", ("gate.action",)),
    ("cli", ("gate.cli", "gate.__main__")),
]
FACE = "gate"  # gate/__init__.py: the version, under every floor

# A library is imported only by the packages that are about it (prefixes).
LIBRARIES = {
    "sqlalchemy": ("gate.db", "gate.store", "gate.datasets", "gate.domain", "gate.service", "workers"),
    "pymysql": ("gate.db", "gate.mysql_tls", "gate.store"),
    "openai": ("gate.calls",),
    "jsonschema": ("gate.prompt",),
    "referencing": ("gate.prompt",),
    "github": ("gate.action",),
    "fastapi": ("gate.service",),
    "starlette": ("gate.service",),
    "uvicorn": ("gate.service", "gate.cli"),
    "prometheus_client": ("gate.service", "workers"),
}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:``: annotations, never run."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            ids |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return ids


def imports_of(name: str, path: Path, known: dict[str, Path], annotations: bool = True) -> list[tuple[str, list[str]]]:
    """(module imported, names imported from it) for every import of gate's and workers'
    modules in the file; ``annotations``: with the ones under ``if TYPE_CHECKING:``."""
    return list(_targets(name, raw_imports(name, path, annotations), known))


def raw_imports(name: str, path: Path, annotations: bool = True) -> list[tuple[str, list[str]]]:
    """(absolute module, names) of every import statement, third-party ones too."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    skip = set() if annotations else _type_checking_only(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            found.append((base, [alias.name for alias in node.names]))
    return found


def _resolve(target: str, known: dict[str, Path]) -> str | None:
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


def _targets(name, found, known):
    for module, names in found:
        targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in known] or [module]
        for target in targets:
            resolved = _resolve(target, known)
            if resolved and resolved != name:
                yield resolved, names


def graph(annotations: bool = True) -> dict[str, set[str]]:
    known = modules()
    return {name: {t for t, _ in imports_of(name, path, known, annotations)} for name, path in known.items()}


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


def floor_of(module: str) -> int | None:
    """The floor a module stands on (its longest matching prefix); -1 for the package face."""
    if module == FACE:
        return -1
    best = None
    for i, (_, prefixes) in enumerate(FLOORS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (i, len(prefix))
    return None if best is None else best[0]


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    """Every import of a module on a higher floor than the importer's, and every module on
    no floor at all."""
    wrong = []
    for src, targets in sorted(edges.items()):
        mine = floor_of(src)
        if mine is None:
            wrong.append(f"{src} stands on no floor: add it to FLOORS (and to docs/architecture.md)")
            continue
        for dst in sorted(targets):
            theirs = floor_of(dst)
            if theirs is not None and theirs > mine:
                wrong.append(f"{src} ({FLOORS[mine][0]}) -> {dst} ({FLOORS[theirs][0]})")
    return wrong


def library_misuse(imports: dict[str, list[str]]) -> list[str]:
    """module -> the top-level names it imports; a library imported outside its packages."""
    wrong = []
    for src, libs in sorted(imports.items()):
        for lib in sorted(set(libs) & set(LIBRARIES)):
            if not any(src == p or src.startswith(p + ".") for p in LIBRARIES[lib]):
                wrong.append(f"{src} imports {lib}, which only {', '.join(LIBRARIES[lib])} may")
    return wrong


def third_party() -> dict[str, list[str]]:
    return {
        name: [module.split(".")[0] for module, _ in raw_imports(name, path, annotations=False)]
        for name, path in modules().items()
    }


def test_the_import_graph_has_no_cycle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_package_imports_only_from_its_floor_and_below():
    assert upward_imports(graph(annotations=False)) == []


def test_an_upward_import_and_a_module_on_no_floor_are_named():
    edges = {
        "gate.prompt.templating": {"gate.store.items", "gate.errors"},  # the prompt format reaching for SQL
        "gate.verdict.bars": {"gate", "gate.states"},  # the face and a lower floor: fine
        "gate.newthing": set(),
    }
    assert upward_imports(edges) == [
        "gate.newthing stands on no floor: add it to FLOORS (and to docs/architecture.md)",
        "gate.prompt.templating (prompt) -> gate.store.items (store)",
    ]


def test_libraries_are_imported_only_where_they_belong():
    assert library_misuse(third_party()) == []


def test_a_library_imported_where_it_does_not_belong_is_named():
    assert library_misuse({"gate.report.markdown": ["sqlalchemy", "jinja2"], "gate.store.items": ["sqlalchemy"]}) == [
        "gate.report.markdown imports sqlalchemy, which only "
        "gate.db, gate.store, gate.datasets, gate.domain, gate.service, workers may"
    ]


def test_the_top_of_gate_holds_only_what_everything_stands_on():
    top = sorted(p.name for p in (ROOT / "gate").glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top


def test_every_package_says_what_it_holds():
    silent = []
    for init in sorted([*(ROOT / "gate").rglob("__init__.py"), *(ROOT / "workers").rglob("__init__.py")]):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        if not doc or len(doc.splitlines()[0].split()) < 4:
            silent.append(str(init.relative_to(ROOT)))
    assert silent == []


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


@pytest.mark.parametrize("floor", [name for name, _ in FLOORS])
def test_each_floor_has_code(floor):
    prefixes = dict(FLOORS)[floor]
    assert any(floor_of(m) is not None and any(m == p or m.startswith(p + ".") for p in prefixes) for m in modules())


def classes_of(path: Path) -> list[ast.ClassDef]:
    return [node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ClassDef)]


def test_no_mixins_gate_is_composed_of_services():
    """Issue 45.4: ``Gate`` is a facade over services built with their dependencies passed
    explicitly, not a stack of mixins that reach each other through ``self``: no class in
    gate/ is named *Mixin, ``Gate`` inherits from nothing (but object), and the client's
    ``RemoteGate`` only from its session (its parts are built with the session's request)."""
    from gate.client.remote import RemoteGate
    from gate.client.session import ServiceSession
    from gate.domain import Gate

    mixins = [
        f"{name}.{node.name}"
        for name, path in modules().items()
        if name.startswith("gate.")
        for node in classes_of(path)
        if node.name.endswith("Mixin")
    ]
    assert mixins == []
    assert Gate.__bases__ == (object,), [base.__qualname__ for base in Gate.__bases__]
    assert RemoteGate.__bases__ == (ServiceSession,), [base.__qualname__ for base in RemoteGate.__bases__]
