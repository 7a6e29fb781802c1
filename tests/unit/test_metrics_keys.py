"""Every key the code reads from a run's figures by name (``metrics["x"]``, ``metrics.get("x")``
on a name ending in ``metrics``) is one gate/records/metrics.py declares. The type checker
holds reads of ``Run.metrics`` to the TypedDict where it is typed; this holds every read
by name, the report's copy and the functions that take a plain dict too, so a misspelt key
cannot read as None in silence."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_type_hints

from gate.records.metrics import RunMetrics

ROOT = Path(__file__).resolve().parents[2]
DECLARED = set(get_type_hints(RunMetrics))


def _named_metrics(node: ast.AST) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name.endswith("metrics")


def keys_read(source: str) -> list[tuple[int, str]]:
    """(line, key) of every read of a literal key from a value named ``...metrics``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Subscript) and _named_metrics(node.value):
            key = node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and _named_metrics(node.func.value)
            and node.args
        ):
            key = node.args[0]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.append((node.lineno, key.value))
    return found


def test_every_key_read_from_a_runs_figures_is_declared():
    unknown, read = [], 0
    for package in ("gate", "workers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.parent.name == "execute" and path.name == "metrics.py":
                continue  # the worker's Prometheus metrics, not a run's figures
            for line, key in keys_read(path.read_text()):
                read += 1
                if key not in DECLARED:
                    unknown.append(f"{path.relative_to(ROOT)}:{line}: {key!r}")
    assert read > 50  # the reads are found at all
    assert not unknown, "keys read from a run's metrics that gate/records/metrics.py does not declare:\n" + "\n".join(
        unknown
    )


def test_a_misspelt_key_is_found():
    source = 'def f(run):\n    m = run.metrics["scored"]\n    return metrics.get("scord", 0) + run_metrics["total"]\n'
    assert sorted(keys_read(source)) == [(2, "scored"), (3, "scord"), (3, "total")]
    assert [k for _, k in keys_read(source) if k not in DECLARED] == ["scord"]
