"""docs/architecture.md cannot drift from the code (as a `cog --check` keeps a CLI reference):
its tables are read as data and compared with inventories built from the code itself.

* "Every SQL statement": one row per module of ``gate/store/``; a statement module's row
  names exactly its public functions (read by introspection: every function defined in the
  module without a leading underscore, exported by ``gate.store`` or not, since each is a
  statement or builds one); the helper modules (``dialect``, ``textsql``) say "no
  statements" and name only what exists. ``schema`` is the tables, not statements.
* "Where each transition lives": every step of ``gate/states.py`` (``UPDATE_STEPS``,
  ``RUN_STEPS``, ``ROLLOUT_STEPS``, ``LIVE_REQUEST_STEPS``) has a row; every state a row names
  exists (an item's in ``Verdict``, a dataset version's in ``gate.store.versions``); every
  ``store.x`` it names resolves, and every ``file: Class.method`` exists in that file.
* The state diagrams draw exactly the steps of ``gate/states.py``.
* "Tables": one row per table of ``gate/store/schema.py``; every column a row names (outside
  its prose in parentheses) is a column of that table.
* Anywhere in the page, ``store.module.x`` names something gate/store/module.py has.

Each failure says which name is missing or stale, and where in the page to put it right."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest
from support.cli import ROOT
from test_structure import FLOORS, LIBRARIES

import gate.store
import gate.store.versions
from gate import states
from gate.store import schema

DOC = ROOT / "docs" / "architecture.md"
HELPER_MODULES = {
    "dialect",
    "textsql",
    "column_types",
}  # SQL spelled per dialect / as text: "no statements" of their own
NOT_IN_THE_TABLE = {"schema"}  # the tables themselves (section "Tables")
TICKED = re.compile(r"`([^`]+)`")


# --- reading the page -------------------------------------------------------------------------


def section(text: str, title: str) -> str:
    """The text under ``## title`` up to the next heading of that level."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"docs/architecture.md has no section '## {title}'"
    return match.group(1)


def table_rows(text: str) -> list[list[str]]:
    """The cells of each body row of the first Markdown table in ``text``."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    assert len(lines) >= 2 and set(lines[1].replace("|", "").strip()) <= set("-: "), "no table"
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines[2:]]


def outside_prose(cell: str) -> str:
    """The cell without its parenthesised prose; a group holding only ticked names (a
    column tuple such as (`run_id`, `position`)) stays."""
    while True:
        stripped = re.sub(
            r"\(([^()]*)\)", lambda m: m.group(0) if re.fullmatch(r"(`\w+`,?\s*)+", m.group(1)) else "", cell
        )
        if stripped == cell:
            return cell
        cell = stripped


def names(cell: str) -> list[str]:
    return [n for n in TICKED.findall(cell) if re.fullmatch(r"\w+", n)]


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text(encoding="utf-8")


# --- the code's inventories -------------------------------------------------------------------


def store_modules() -> dict[str, object]:
    return {m.name: importlib.import_module(f"gate.store.{m.name}") for m in pkgutil.iter_modules(gate.store.__path__)}


def public_functions(module) -> set[str]:
    return {
        name
        for name, member in vars(module).items()
        if inspect.isfunction(member) and member.__module__ == module.__name__ and not name.startswith("_")
    }


def steps() -> dict[str, set[tuple[str, str]]]:
    return {
        "update": {(str(f), str(t)) for t, froms in states.UPDATE_STEPS.items() for f in froms},
        "run": {(str(f), str(t)) for t, froms in states.RUN_STEPS.items() for f in froms},
        "sentinel": {(str(f), str(t)) for t, froms in states.SENTINEL_STEPS.items() for f in froms},
        "rollout": {(str(f), str(t)) for t, froms in states.ROLLOUT_STEPS.items() for f in froms},
        "live request": {(str(f), str(t)) for t, froms in states.LIVE_REQUEST_STEPS.items() for f in froms},
    }


INSERTED = {
    "update": "PENDING",
    "run": "PENDING",
    "item": "PENDING",
    "rollout": "CANARY",
    "live request": "PENDING",
}  # where a row starts


def resolve_store(path: str) -> bool:
    """``store.module.name``: a name gate/store/module.py defines (``store.module``: the module)."""
    _, module, *rest = path.split(".")
    found = store_modules().get(module)
    return found is not None and all(hasattr(found, name) for name in rest[:1])


def qualnames(path: Path) -> set[str]:
    """Every function, class and module-level name of a file, as ``f``, ``C``, ``C.m``, ``NAME``."""
    found = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        found |= {t.id for t in targets if isinstance(t, ast.Name)}
        if isinstance(node, ast.ClassDef):
            found |= {
                f"{node.name}.{item.name}"
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
    return found


# --- "Every SQL statement" ------------------------------------------------------------------------


def statement_table_problems(text: str) -> list[str]:
    where = "docs/architecture.md, section 'Every SQL statement'"
    rows = {}
    for cells in table_rows(section(text, "Every SQL statement")):
        module = cells[0].strip("`").removesuffix(".py")
        rows[module] = cells[1]
    problems = []
    modules = {name: module for name, module in store_modules().items() if name not in NOT_IN_THE_TABLE}
    for name in sorted(set(modules) - set(rows)):
        problems.append(
            f"{where}: gate/store/{name}.py has no row: add | `{name}.py` | "
            f"{', '.join(f'`{f}`' for f in sorted(public_functions(modules[name])))} |"
        )
    for name in sorted(set(rows) - set(modules)):
        problems.append(f"{where}: the row `{name}.py` names a module gate/store/ does not have: remove the row")
    for name in sorted(set(rows) & set(modules)):
        module, cell = modules[name], rows[name]
        if name in HELPER_MODULES:
            if not cell.startswith("no statements"):
                problems.append(f"{where}: the row `{name}.py` must start 'no statements' (a helper module)")
            stale = [n for n in names(cell) if not any(hasattr(m, n) for m in store_modules().values())]
        else:
            listed = set(names(outside_prose(cell)))
            problems += [
                f"{where}: the row `{name}.py` lacks `{f}` (a public function of gate/store/{name}.py): "
                "add it to that row"
                for f in sorted(public_functions(module) - listed)
            ]
            stale = sorted(listed - public_functions(module))
        problems += [
            f"{where}: the row `{name}.py` names `{n}`, which gate/store/{name}.py does not define: remove or rename it"
            for n in stale
        ]
    return problems


# --- "Where each transition lives" and the state diagrams ------------------------------------------

SUBJECT = re.compile(
    r"\b(dataset versions?|live requests?|updates?|runs?|items?|sentinels?|rollouts?)"
    r"((?:\s+[A-Z_]+(?:\s*/\s*[A-Z_]+)*)?)\s*→\s*"
    r"([A-Z_]+(?:\s*/\s*[A-Z_]+)*)"
)


def transition_cell(cell: str) -> list[tuple[str, list[str], list[str]]]:
    """(subject, from states, to states) of each ``subject [FROM] → TO / TO`` in a cell."""
    found = []
    for subject, froms, tos in SUBJECT.findall(cell):
        subject = {
            "updates": "update",
            "runs": "run",
            "items": "item",
            "rollouts": "rollout",
            "dataset versions": "dataset version",
            "sentinels": "sentinel",
            "live requests": "live request",
        }.get(subject, subject)
        found.append((subject, re.findall(r"[A-Z_]+", froms), re.findall(r"[A-Z_]+", tos)))
    return found


def transition_table_problems(text: str) -> list[str]:
    where = "docs/architecture.md, section 'Where each transition lives'"
    known = {
        "update": {str(s) for s in states.UpdateStatus},
        "run": {str(s) for s in states.RunStatus},
        "item": {str(s) for s in states.Verdict},
        "sentinel": {str(s) for s in states.Verdict},
        "rollout": {str(s) for s in states.RolloutStatus},
        "live request": {str(s) for s in states.LiveRequestStatus},
        "dataset version": {gate.store.versions.IMPORTING, gate.store.versions.READY, gate.store.versions.DELETING},
    }
    needed, problems, covered = steps(), [], set()
    file = klass = None
    file_of_class: dict[str, str] = {}  # a row names `file: Class.m` once; later rows `Class.m`
    for cells in table_rows(section(text, "Where each transition lives")):
        transition, code, statements = cells[0], cells[1], cells[2]
        for subject, froms, tos in transition_cell(transition):
            for state in froms + tos:
                if state not in known[subject]:
                    problems.append(
                        f"{where}: the row '{transition}' names {subject} state {state}, which "
                        "gate/states.py (or gate/store/versions.py) does not have: rename it"
                    )
            if subject in needed:
                for to in tos:
                    if to == INSERTED.get(subject) and not froms:
                        continue  # inserted in its first state: the start, not a step
                    legal = {f for f, t in needed[subject] if t == to}
                    if not legal:
                        problems.append(
                            f"{where}: the row '{transition}' has a {subject} move to {to}, which "
                            f"gate/states.py allows from nowhere"
                        )
                    for f in froms or sorted(legal):
                        if (f, to) in needed[subject]:
                            covered.add((subject, f, to))
                        else:
                            problems.append(
                                f"{where}: the row '{transition}' has {subject} {f} → {to}, which "
                                "gate/states.py does not allow"
                            )
        for ref in TICKED.findall(code):
            for part in re.split(r"\s*→\s*", ref):
                if ": " in part:
                    file, part = part.split(": ", 1)
                    klass = part.split(".")[0] if "." in part else None
                    if klass:
                        file_of_class[klass] = file
                elif "." in part:
                    klass = part.split(".")[0]
                    file = file_of_class.get(klass, file)
                qualname = part if "." in part or klass is None else f"{klass}.{part}"
                path = ROOT / (file or "")
                if not path.is_file() or qualname not in qualnames(path):
                    problems.append(
                        f"{where}: the row '{transition}' names `{part}` in {file}, which is not "
                        "there: name the function that makes the move"
                    )
        for ref in TICKED.findall(statements):
            if ref.startswith("store.") and not resolve_store(ref):
                problems.append(
                    f"{where}: the row '{transition}' names `{ref}`, which gate.store does not "
                    "have: name the statement that makes the move"
                )
    for subject, pairs in needed.items():
        for f, to in sorted(pairs):
            if (subject, f, to) not in covered:
                problems.append(
                    f"{where}: no row for the {subject} step {f} → {to} (gate/states.py): add "
                    f"| {subject} {f} → {to} | `file: function` | `store.module.statement` |"
                )
    return problems


def diagram_problems(text: str) -> list[str]:
    """The stateDiagram blocks of prompt_update, prompt_run and prompt_run_sentinel draw exactly the steps."""
    where = "docs/architecture.md, section 'State machines'"
    problems = []
    blocks = re.findall(r"```mermaid\n(stateDiagram-v2.*?)```", section(text, "State machines"), re.S)
    drawn = {}
    for block in blocks:
        title = re.search(r'state "([^"]+)" as', block).group(1)
        drawn[title] = {(a, b) for a, b in re.findall(r"^\s*(\S+) --> (\S+?):", block, re.M) if a != "[*]"}
    for title, subject in (
        ("prompt_update", "update"),
        ("prompt_run", "run"),
        ("prompt_run_sentinel", "sentinel"),
        ("prompt_rollout", "rollout"),
        ("live_request", "live request"),
    ):
        want, have = steps()[subject], drawn.get(title, set())
        problems += [
            f"{where}: the {title} diagram lacks {a} --> {b} (gate/states.py allows it): draw it"
            for a, b in sorted(want - have)
        ]
        problems += [
            f"{where}: the {title} diagram draws {a} --> {b}, which gate/states.py does not allow"
            for a, b in sorted(have - want)
        ]
    verdicts = {str(s) for s in states.Verdict}
    for a, b in sorted(drawn.get("item verdict", set())):
        problems += [
            f"{where}: the item verdict diagram names {s}, which states.Verdict does not have"
            for s in (a, b)
            if s not in verdicts
        ]
    return problems


# --- "Tables" and the rest of the page -----------------------------------------------------------


def tables_problems(text: str) -> list[str]:
    where = "docs/architecture.md, section 'Tables'"
    problems, seen = [], set()
    for cells in table_rows(section(text, "Tables")):
        table = cells[0].strip("`")
        seen.add(table)
        if table not in schema.meta.tables:
            problems.append(f"{where}: the row `{table}` names a table gate/store/schema.py does not have")
            continue
        columns = set(schema.meta.tables[table].c.keys())
        problems += [
            f"{where}: the row `{table}` names column `{c}`, which the table does not have (schema.py): "
            "remove or rename it"
            for c in names(outside_prose(cells[2]))
            if c not in columns
        ]
    problems += [
        f"{where}: table `{t}` (gate/store/schema.py) has no row: add | `{t}` | one row is | key columns |"
        for t in sorted(set(schema.meta.tables) - seen)
    ]
    return problems


def store_reference_problems(text: str) -> list[str]:
    return [
        f"docs/architecture.md line {text[: m.start()].count(chr(10)) + 1}: `{m.group(1)}` is not in gate.store: "
        "rename it"
        for m in re.finditer(r"\b(store\.[a-z_]\w*(?:\.[a-z_]\w*)?)", text)
        if not resolve_store(m.group(1))
    ]


def file_reference_problems(text: str) -> list[str]:
    """Every `path/to/file.py` the page names exists, and every `path/to/file.py: name` in it."""
    problems = []
    for m in re.finditer(r"`((?:[\w.-]+/)+[\w.-]+\.py)(?::\s*([\w.]+))?`", text):
        path, name = ROOT / m.group(1), m.group(2)
        line = text[: m.start()].count("\n") + 1
        if not path.is_file():
            problems.append(f"docs/architecture.md line {line}: {m.group(1)} does not exist: rename it")
        elif name and name not in qualnames(path):
            problems.append(f"docs/architecture.md line {line}: {m.group(1)} has no {name}: rename it")
    return problems


def layers_table_problems(text: str) -> list[str]:
    """The layers table: one row per floor of ``test_structure.FLOORS``, in its order, naming
    exactly its packages, and each row's libraries exactly ``test_structure.LIBRARIES``'."""
    where = "docs/architecture.md, section 'Layout and layers'"
    rows = table_rows(section(text, "Layout and layers"))
    problems = []
    if [r[0] for r in rows] != [name for name, _ in FLOORS]:
        problems.append(f"{where}: the floors are {[r[0] for r in rows]}, the code's {[n for n, _ in FLOORS]}")
    for cells in rows:
        floor, packages, libraries = cells[0], cells[1], cells[-1]
        prefixes = dict(FLOORS).get(floor, ())
        named = {".".join(p.removesuffix(".py").removesuffix("/").split("/")) for p in TICKED.findall(packages)}
        if named != set(prefixes):
            problems.append(f"{where}: the row '{floor}' names {sorted(named)}, the floor holds {sorted(prefixes)}")
        allowed = {lib for lib, users in LIBRARIES.items() if any(p in users for p in prefixes)}
        if set(TICKED.findall(libraries)) != allowed:
            problems.append(
                f"{where}: the row '{floor}' allows {sorted(TICKED.findall(libraries))}, the code {sorted(allowed)}"
            )
    return problems


CHECKS = [
    layers_table_problems,
    statement_table_problems,
    transition_table_problems,
    diagram_problems,
    tables_problems,
    store_reference_problems,
    file_reference_problems,
]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_the_architecture_page_matches_the_code(doc, check):
    problems = check(doc)
    assert not problems, "\n".join(problems)


# --- the checks fail when the page drifts ----------------------------------------------------------


def test_a_function_missing_from_the_statement_table_is_named(doc):
    drifted = doc.replace("`flip_counts`, ", "").replace(", `flip_counts`", "")
    assert any("lacks `flip_counts`" in p and "item_stats.py" in p for p in statement_table_problems(drifted))


def test_a_function_that_does_not_exist_is_named(doc):
    drifted = doc.replace("| `fleet.py` | `fleet_counts`", "| `fleet.py` | `fleet_counts`, `fleet_sizes`")
    assert statement_table_problems(drifted) == [
        "docs/architecture.md, section 'Every SQL statement': the row `fleet.py` names `fleet_sizes`, which "
        "gate/store/fleet.py does not define: remove or rename it"
    ]


def test_a_stale_state_a_missing_step_and_a_moved_function_are_named(doc):
    drifted = (
        doc.replace("IMPORTING → READY", "BUILDING → READY")
        .replace("| update → APPLIED / PASSED / REJECTED / FAILED |", "| update → PASSED / REJECTED / FAILED |")
        .replace("`Executor._stop_run_over_budget`", "`Executor._write_results`")
    )
    problems = transition_table_problems(drifted)
    assert any("names dataset version state BUILDING" in p for p in problems), problems
    assert any("no row for the update step RUNNING → APPLIED" in p for p in problems), problems
    assert any(
        "names `Executor._write_results` in workers/execute/executor.py, which is not there" in p for p in problems
    )


def test_a_diagram_arrow_and_a_table_column_that_drifted_are_named(doc):
    drifted = doc.replace("    RUNNING --> PASSED: check mode, every bar cleared\n", "").replace(
        "`name` unique, `source_uri`", "`name` unique, `source_url`"
    )
    assert any("prompt_update diagram lacks RUNNING --> PASSED" in p for p in diagram_problems(drifted))
    assert any("names column `source_url`" in p for p in tables_problems(drifted))


def test_a_rollout_step_missing_from_the_table_or_the_diagram_is_named(doc):
    drifted = doc.replace(
        "| rollout CANARY → PROMOTED / ROLLED_BACK / UNDECIDED |", "| rollout CANARY → PROMOTED / ROLLED_BACK |"
    ).replace("    CANARY --> UNDECIDED: max_hours passed", "    CANARY --> HELD: max_hours passed")
    assert any("no row for the rollout step CANARY → UNDECIDED" in p for p in transition_table_problems(drifted))
    problems = diagram_problems(drifted)
    assert any("prompt_rollout diagram lacks CANARY --> UNDECIDED" in p for p in problems), problems
    assert any("prompt_rollout diagram draws CANARY --> HELD" in p for p in problems), problems


def test_a_layers_table_that_drifted_is_named(doc):
    drifted = doc.replace("| verdict | `gate/verdict/` |", "| verdict | `gate/verdict/`, `gate/stats.py` |").replace(
        "| calls | `gate/calls/` | the call path production and the executor share | `openai` |",
        "| calls | `gate/calls/` | the call path production and the executor share | — |",
    )
    problems = layers_table_problems(drifted)
    assert any("the row 'verdict' names ['gate.stats', 'gate.verdict']" in p for p in problems), problems
    assert any("the row 'calls' allows [], the code ['openai']" in p for p in problems), problems


# --- "How a verdict is made" ------------------------------------------------------------------

CODE_REF = re.compile(r"`((?:gate|workers)/[\w/]+\.py)(?::\s*(\w+))?`")
MEMBER_REF = re.compile(r"`([A-Z]\w+)\.(\w+)`")


def defined_names(path: Path) -> dict[str, set[str]]:
    """{top-level name: its members} of a module: functions, classes (with their methods and
    class attributes) and assignments."""
    names: dict[str, set[str]] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = set()
        elif isinstance(node, ast.ClassDef):
            members = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            members |= {
                t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
            }
            members |= {
                n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
            }
            names[node.name] = members
        elif isinstance(node, ast.Assign):
            names.update({t.id: set() for t in node.targets if isinstance(t, ast.Name)})
    return names


def verdict_walk_problems(text: str) -> list[str]:
    """Every `path.py` and `path.py: name` the walk names exists; every `Class.member` it names is
    a member of a class of one of the modules it names, or of a base class in gate/kinds/base.py."""
    walk = section(text, "How a verdict is made")
    where = "docs/architecture.md, How a verdict is made"
    problems, defined = [], {}
    for path, name in CODE_REF.findall(walk):
        file = ROOT / path
        if not file.is_file():
            problems.append(f"{where}: names {path}, which is not there")
            continue
        defined.setdefault(path, defined_names(file))
        if name and name not in defined[path]:
            problems.append(f"{where}: names {path}: {name}, which {path} does not define")
    classes: dict[str, set[str]] = {}
    for names in [*defined.values(), defined_names(ROOT / "gate/kinds/base.py")]:
        for cls, members in names.items():
            classes.setdefault(cls, set()).update(members)
    base = classes.get("DecisionKind", set())
    for cls, member in MEMBER_REF.findall(walk):
        if cls not in classes or member not in classes[cls] | base:
            problems.append(f"{where}: names {cls}.{member}, which no module it names defines")
    return problems


def test_the_walk_from_the_yaml_to_the_report_names_what_exists(doc):
    assert verdict_walk_problems(doc) == []


def test_a_walk_that_drifted_is_named(doc):
    drifted = doc.replace("`gate/kinds/judged.py: JudgedKind`", "`gate/kinds/judged.py: GradedKind`").replace(
        "`JudgedKind.judged_baseline`", "`JudgedKind.baseline_of`"
    )
    problems = verdict_walk_problems(drifted)
    assert any("gate/kinds/judged.py: GradedKind, which gate/kinds/judged.py does not define" in p for p in problems)
    assert any("JudgedKind.baseline_of, which no module it names defines" in p for p in problems), problems
