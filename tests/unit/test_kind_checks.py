"""A run is held to its bars as its kind holds them: the verdict's entry points take the kind's
checks (``KindChecks``; ``checks_of`` for an update's runs) and default to every kind's checks
unchanged (``kept``), so a caller that forgot them would silently drop a judged run's rule (the
corrected pass rate, ``max_loss_rate``). Every call outside gate/verdict passes them."""

from __future__ import annotations

import ast
from pathlib import Path

from gate.kinds import checks_of
from gate.kinds.compared import COMPARED
from gate.kinds.judged import JUDGED
from gate.kinds.label import LABEL
from gate.records.pinned import Pinned

ROOT = Path(__file__).resolve().parents[2]
# the entry point -> how many arguments a call that passes the kind's checks gives it
ENTRY_POINTS = {
    "gate.verdict.bar_checks": {"check": 3},
    "gate.verdict.update_outcome": {"run_checks": 2, "update_end": 3},
    "gate.verdict.early_stop": {"settled": 3, "missed_bars": 3},
}


def _calls_without_the_kind(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    wanted: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ENTRY_POINTS:
            for alias in node.names:
                if alias.name in ENTRY_POINTS[node.module]:
                    wanted[alias.asname or alias.name] = ENTRY_POINTS[node.module][alias.name]
    return [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.func.id}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in wanted
        and len(node.args) + len(node.keywords) < wanted[node.func.id]
    ]


def test_every_caller_above_the_verdict_passes_the_kinds_checks():
    files = [p for d in ("gate", "workers") for p in sorted((ROOT / d).rglob("*.py")) if "verdict" not in p.parts]
    assert [c for p in files for c in _calls_without_the_kind(p)] == []


def test_a_runs_checks_are_its_kinds():
    def run(decision):
        return type("Run", (), {"pinned": Pinned.of({"decision": decision})})()

    assert checks_of(run({"type": "first_word"})) == LABEL.checks
    assert checks_of(run({"type": "judge", "judge": "j", "pass": ["good"]})) == JUDGED.checks
    assert checks_of(run({"type": "judge", "judge": "j", "compare": "live"})) == COMPARED.checks
    assert checks_of(run(None)) == LABEL.checks
