"""Who may touch what, by imports: a statement of ``gate/store/`` that moves a guarded row
(the live table, item verdicts, a run's or an update's status, a dataset version) may be
imported only by the modules docs/architecture.md's "Who may touch what" table gives it to,
and the table lists exactly these statements per role. So "only the live-transition module
(``gate.store.live_transition``, run by the reconcile step) writes the live ``prompt``
table" is a rule the code cannot break quietly: a second importer of ``write_live``, inside
the store or out, fails here, and so does a statement writing the live table's rows
anywhere but ``gate/store/live.py``."""

from __future__ import annotations

import re

from support.cli import ROOT
from test_structure import modules, raw_imports

# statement -> the modules that may import it
WRITERS = {
    # the live table, its history and holds, and a rollout's end: written by the live-transition
    # module alone (gate.store.live_transition; test_only_the_live_transition_module_writes_the_live_table
    # holds the store's own modules to it), which the reconcile step runs: the reconcile worker, and for a person's
    # rollback no worker claimed in time, the requester (``Live.rollback``: the same step)
    "gate.store.live.write_live": {"gate.store.live_transition"},
    "gate.store.live.restore_live": {"gate.store.live_transition"},
    "gate.store.holds.add_hold": {"gate.store.live_transition"},
    "gate.store.rollouts.start_rollout": {"gate.store.live_transition"},
    "gate.store.rollouts.supersede_rollout": {"gate.store.live_transition"},
    "gate.store.rollouts.end_rollout": {"gate.store.live_transition"},
    "gate.store.live_requests.claim_live_request": {"gate.store.live_transition"},
    "gate.store.live_requests.end_live_request": {"gate.store.live_transition"},
    "gate.store.live_transition.apply_update": {"workers.reconcile"},
    "gate.store.live_transition.carry_out_request": {"workers.reconcile", "gate.domain.live"},
    # requests for it: a person's rollback (the service), a canary's decision (the rollout worker)
    "gate.store.live_requests.request_rollback": {"gate.domain.live"},
    "gate.store.live_requests.request_canary_decision": {"workers.rollout"},
    "gate.store.rollouts.pin_rollout": {"gate.domain.gate"},  # an apply-mode submission pins the gate config's
    "gate.store.rollouts.set_rollout_setting": {"gate.domain.rollouts"},
    # what production serves and its feedback: the service records them (through the service or not)
    "gate.store.served.report_served": {"gate.domain.served"},
    "gate.store.feedback.record_feedback": {"gate.domain.rollouts"},
    # item verdicts: the executor writes them; finalize only ends items whose attempts ran out
    "gate.store.items.write_item_results": {"workers.execute.write_back"},
    "gate.store.items.fail_unclaimed_items": {"workers.execute.executor"},
    "gate.store.items.release_items": {"workers.execute.executor"},
    "gate.store.stops.stop_update": {"workers.execute.early_stop"},
    "gate.store.items.fail_exhausted_items": {"workers.finalize"},
    # a judged run's sentinels: staged at submit, their verdicts written back by the executor
    "gate.store.sentinels.insert_sentinels": {"gate.domain.judging"},
    "gate.store.sentinels.write_sentinel_results": {"workers.execute.judging"},
    # items come only from materialize
    "gate.store.items.copy_version_page": {"workers.materialize"},
    # runs: materialize starts one (or ends it on bad data), finalize closes it, reconcile
    # writes its comparison
    "gate.store.runs.transition_run": {"workers.materialize", "workers.finalize"},
    "gate.store.runs.set_run_metrics": {"workers.reconcile"},
    # updates: the service stages and cancels, materialize starts, reconcile ends
    "gate.store.updates.insert_update": {"gate.domain.gate"},
    "gate.store.runs.insert_run": {"gate.domain.gate", "gate.domain.baseline"},  # a submission stages its runs
    "gate.store.updates.cancel_update": {
        "gate.domain.gate",  # latest wins: a submission cancels the updates it replaces
        "gate.domain.updates",  # a user cancels one
    },
    "gate.store.updates.start_update": {"workers.materialize"},
    "gate.store.updates.transition_update": {"workers.reconcile"},
    # dataset versions: the importer writes them, the service makes one current
    "gate.store.versions.create_version": {"gate.datasets.importer"},
    "gate.store.versions.insert_version_rows": {"gate.datasets.importer"},
    "gate.store.versions.finish_version": {"gate.datasets.importer"},
    "gate.store.versions.delete_version_rows": {"gate.datasets.importer"},
    "gate.store.versions.delete_version": {"gate.datasets.importer"},
    "gate.store.versions.set_current_version": {"gate.domain.datasets"},
}

ROLE_ROW = re.compile(r"`((?:gate|workers)/[\w/]+(?:\.py|/))`")
STATEMENT = re.compile(r"`store\.(\w+)\.(\w+)`")


def statement_importers() -> dict[str, set[str]]:
    """statement of gate.store -> the modules (outside it) that import it."""
    found: dict[str, set[str]] = {}
    for name, path in modules().items():
        if name == "gate.store" or name.startswith("gate.store."):
            continue
        for module, names in raw_imports(name, path):
            for n in names:
                found.setdefault(f"{module}.{n}", set()).add(name)
    return found


def trespasses(importers: dict[str, set[str]]) -> list[str]:
    return [
        f"{who} imports {statement}, which "
        + (
            f"only {', '.join(sorted(WRITERS[statement]))} may"
            if WRITERS[statement]
            else "no module outside gate/store may"
        )
        for statement, whos in sorted(importers.items())
        if statement in WRITERS
        for who in sorted(whos - WRITERS[statement])
    ]


def table_of_roles() -> dict[frozenset[str], set[str]]:
    """The "Who may touch what" table: (modules of a row) -> the statements its last column names."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    body = re.search(r"^## Who may touch what\n(.*?)(?=^## )", text, re.S | re.M).group(1)
    rows = {}
    for line in body.splitlines():
        if not line.startswith("| ") or line.startswith("| role") or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        paths = ROLE_ROW.findall(cells[0])
        mods = frozenset(".".join(p.removesuffix(".py").removesuffix("/").split("/")) for p in paths)
        rows[mods] = {f"gate.store.{m}.{f}" for m, f in STATEMENT.findall(cells[-1])}
    return rows


def covers(prefixes: frozenset[str], module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def table_problems(rows: dict[frozenset[str], set[str]]) -> list[str]:
    problems = []
    for statement, allowed in sorted(WRITERS.items()):
        for module in sorted(allowed):
            row = next((r for r in rows if covers(r, module)), None)
            if row is None:
                problems.append(f"no row of the table holds {module}")
            elif statement not in rows[row]:
                problems.append(f"the row of {module} does not name `store.{statement.removeprefix('gate.store.')}`")
    for row, statements in rows.items():
        for statement in sorted(statements):
            if not any(covers(row, m) for m in WRITERS.get(statement, ())):
                problems.append(
                    f"the row of {', '.join(sorted(row))} names {statement}, which WRITERS does not give it"
                )
    return problems


def test_only_their_writers_import_the_guarded_statements():
    assert trespasses(statement_importers()) == []


LIVE_WRITES = ("write_live", "restore_live", "add_hold", "start_rollout", "supersede_rollout", "end_rollout")
LIVE_TABLES = ("prompt", "prompt_version", "prompt_hold")


def store_importers_of_live_writes() -> dict[str, set[str]]:
    """statement of the live table (``LIVE_WRITES``) -> the modules inside gate/store that import it."""
    found: dict[str, set[str]] = {}
    for name, path in modules().items():
        if not name.startswith("gate.store."):
            continue
        for _module, names in raw_imports(name, path):
            for n in set(names) & set(LIVE_WRITES):
                found.setdefault(n, set()).add(name)
    return found


def live_table_writers() -> set[str]:
    """Modules of gate/store whose statements INSERT into or UPDATE a table of the live row."""
    pattern = re.compile(rf"\b(?:insert|update)\(({'|'.join(LIVE_TABLES)})\)")
    return {name for name, path in modules().items() if pattern.search(path.read_text())}


def test_only_the_live_transition_module_writes_the_live_table():
    assert live_table_writers() <= {"gate.store.live", "gate.store.holds"}
    assert store_importers_of_live_writes() == {w: {"gate.store.live_transition"} for w in LIVE_WRITES}


def test_every_guarded_statement_exists():
    store = modules()
    missing = []
    for statement in WRITERS:
        module, _, name = statement.rpartition(".")
        if name not in {d for d in re.findall(r"^def (\w+)", store[module].read_text(), re.M)}:
            missing.append(statement)
    assert missing == []


def test_a_role_reaching_a_statement_it_must_not_is_named():
    importers = {
        "gate.store.live.write_live": {"workers.reconcile"},  # a writer of live beside the live-transition module
        "gate.store.items.write_item_results": {"workers.execute.write_back", "workers.finalize"},
        "gate.store.items.find_answers": {"gate.service.api"},  # reading is anyone's
    }
    assert trespasses(importers) == [
        "workers.finalize imports gate.store.items.write_item_results, which only workers.execute.write_back may",
        "workers.reconcile imports gate.store.live.write_live, which only gate.store.live_transition may",
    ]


def test_the_who_may_touch_what_table_lists_exactly_the_writers():
    assert table_problems(table_of_roles()) == []


def test_a_table_that_drifted_from_the_writers_is_named():
    rows = table_of_roles()
    reconcile = next(r for r in rows if "workers.reconcile" in r)
    rows[reconcile] = (rows[reconcile] - {"gate.store.live_transition.apply_update"}) | {
        "gate.store.items.write_item_results"
    }
    problems = table_problems(rows)
    assert "the row of workers.reconcile does not name `store.live_transition.apply_update`" in problems
    assert any("names gate.store.items.write_item_results, which WRITERS does not give it" in p for p in problems)


def test_the_store_is_imported_by_module_never_as_a_whole():
    """``from gate import store`` (or ``import gate.store``) would reach every statement
    through one name, past the rule above: each statement is imported from its module."""
    whole = sorted(
        name
        for name, path in modules().items()
        if not name.startswith("gate.store")
        for module, names in raw_imports(name, path)
        if (module == "gate" and "store" in names)
        or (module == "gate.store" and not names)
        or (
            module == "gate.store"
            and set(names) - {m.rpartition(".")[2] for m in modules() if m.startswith("gate.store.")}
        )
    )
    assert whole == []
