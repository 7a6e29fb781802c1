"""Store and service on MariaDB and SQLite: registration, submit, latest-wins,
transitions, atomicity, bad input."""

from __future__ import annotations

from decimal import Decimal

import pytest
from sqlalchemy import func, select
from support.helpers import setup_gate, spec, write_csv

from gate.domain import gate as service_gate
from gate.errors import IllegalTransition, NotFound, SpecError, UsageError
from gate.states import RUN_STEPS, UPDATE_STEPS, RunStatus, UpdateStatus
from gate.store.datasets import list_datasets
from gate.store.runs import claim_materialize, insert_run, transition_run
from gate.store.schema import dataset, prompt_run, prompt_update
from gate.store.updates import transition_update


def count(gate, table) -> int:
    with gate.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar()


def test_upgrade_is_idempotent(gate):
    assert gate.upgrade() == []
    with gate.engine.connect() as conn:
        assert list_datasets(conn) == []


def test_register_map_and_list(gate, tmp_path):
    setup_gate(gate, tmp_path, datasets=(("d1", 3, "0.9"), ("d2", 3, "0.95")))
    listed = {ds.name: maps for ds, maps in gate.list_datasets()}
    assert set(listed) == {"d1", "d2"}
    assert listed["d1"][0].min_accuracy == Decimal("0.9")
    gate.map_dataset("p1", "d1", "0.8")  # re-map changes the bar, no second row
    assert [m.min_accuracy for m in gate.mappings("p1")] == [Decimal("0.8"), Decimal("0.95")]
    assert gate.unmap_dataset("p1", "d2") is True
    assert [m.dataset_name for m in gate.mappings("p1")] == ["d1"]


def test_relative_dataset_path_resolves_against_base_dir(gate, tmp_path):
    write_csv(tmp_path / "rel.csv", 2)
    ds = gate.register_dataset("rel", "rel.csv", base_dir=tmp_path)
    assert ds.source_uri == str((tmp_path / "rel.csv").resolve())


@pytest.mark.parametrize("bar", ["1.5", "-0.1", "abc", "nan", "90", "0.1234567891"])
def test_bad_bar_is_refused_and_nothing_written(gate, tmp_path, bar):
    setup_gate(gate, tmp_path)
    with pytest.raises(UsageError):
        gate.map_dataset("p2", "d1", bar)
    assert [m.prompt_name for m in gate.mappings()] == ["p1"]


def test_map_dataset_stores_the_extra_bars(gate, tmp_path):
    setup_gate(gate, tmp_path)
    m = gate.map_dataset("p2", "d1", "0.9", bars={"max_broken": "0", "min_recall": {"yes": 0.95}})
    assert (m.min_accuracy, m.bars) == (Decimal("0.9"), {"max_broken": 0, "min_recall": {"yes": "0.95"}})
    assert [x.bars for x in gate.mappings("p2")] == [m.bars]
    gate.map_dataset("p2", "d1", "0.9")  # re-map replaces the bars as a whole
    assert [x.bars for x in gate.mappings("p2")] == [None]


@pytest.mark.parametrize("bars", [{"max_broken": -1}, {"min_recall": {"yes": 2}}, {"nope": 1}])
def test_bad_extra_bars_are_refused_and_nothing_written(gate, tmp_path, bars):
    setup_gate(gate, tmp_path)
    with pytest.raises(UsageError):
        gate.map_dataset("p2", "d1", "0.9", bars=bars)
    assert [m.prompt_name for m in gate.mappings()] == ["p1"]


@pytest.mark.parametrize("name", ["Upper", "-lead", "has space", "x" * 129, "", "a/b"])
def test_bad_names_are_refused(gate, tmp_path, name):
    with pytest.raises(UsageError):
        gate.register_dataset(name, str(write_csv(tmp_path / "d.csv", 1)))
    assert count(gate, dataset) == 0


def test_unknown_dataset_and_update(gate):
    with pytest.raises(NotFound):
        gate.map_dataset("p1", "nope", "0.5")
    with pytest.raises(NotFound):
        gate.status(12345)
    with pytest.raises(NotFound):
        gate.live("p1")


def test_submit_without_mapping_says_how_to_map(gate):
    with pytest.raises(UsageError, match="promptgate dataset map p1"):
        gate.submit(spec())
    assert count(gate, prompt_update) == 0


def test_submit_creates_one_run_per_dataset_with_bar_copied(gate, tmp_path):
    setup_gate(gate, tmp_path, datasets=(("d1", 3, "0.9"), ("d2", 3, "0.95")))
    uid = gate.submit(spec(), "check", {"repo": "o/r", "pr": 7, "sha": "ab" * 20})
    report = gate.status(uid)
    assert report.status == UpdateStatus.PENDING and report.exit_code == 3
    assert [(r.dataset, r.bar, r.status) for r in report.runs] == [
        ("d1", Decimal("0.9"), "PENDING"),
        ("d2", Decimal("0.95"), "PENDING"),
    ]
    gate.map_dataset("p1", "d1", "0.1")  # a later re-map does not touch the staged run
    assert gate.status(uid).runs[0].bar == Decimal("0.9")
    assert report.update.source == {"repo": "o/r", "pr": 7, "sha": "ab" * 20}
    assert [u.id for u in gate.updates_for_sha("ab" * 20)] == [uid]


def test_submit_is_atomic_when_it_fails_half_way(gate, tmp_path, monkeypatch):
    setup_gate(gate, tmp_path, datasets=(("d1", 3, "0.9"), ("d2", 3, "0.95")))
    first = gate.submit(spec(), "apply")
    real = insert_run
    calls = []

    def failing_insert_run(conn, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("injected fault between the inserts")
        return real(conn, *args, **kwargs)

    monkeypatch.setattr(service_gate, "insert_run", failing_insert_run)
    with pytest.raises(RuntimeError, match="injected"):
        gate.submit(spec(), "apply")
    assert count(gate, prompt_update) == 1
    assert count(gate, prompt_run) == 2
    assert gate.status(first).status == UpdateStatus.PENDING  # its cancellation rolled back too


def test_latest_wins_for_apply_mode(gate, tmp_path):
    setup_gate(gate, tmp_path)
    a = gate.submit(spec(), "apply")
    c = gate.submit(spec(), "check")
    b = gate.submit(spec(), "apply")
    ra = gate.status(a)
    assert ra.status == UpdateStatus.CANCELLED and ra.update.reason == f"superseded by update {b}"
    assert {r.status for r in ra.runs} == {RunStatus.CANCELLED}
    assert gate.status(b).status == UpdateStatus.PENDING
    assert gate.status(c).status == UpdateStatus.PENDING  # check mode is not touched by apply


def test_check_mode_latest_wins_per_source(gate, tmp_path):
    setup_gate(gate, tmp_path)
    pr1 = gate.submit(spec(), "check", {"repo": "o/r", "pr": 1})
    pr2 = gate.submit(spec(), "check", {"repo": "o/r", "pr": 2})
    pr1b = gate.submit(spec(), "check", {"repo": "o/r", "pr": 1})
    assert gate.status(pr1).status == UpdateStatus.CANCELLED
    assert gate.status(pr2).status == UpdateStatus.PENDING
    assert gate.status(pr1b).status == UpdateStatus.PENDING


def test_cancel_and_terminal_states_are_terminal(gate, tmp_path):
    setup_gate(gate, tmp_path)
    uid = gate.submit(spec())
    gate.cancel(uid)
    assert gate.status(uid).exit_code == 2
    with pytest.raises(IllegalTransition):
        gate.cancel(uid)


def _legal_update_pairs():
    return [(src, to) for to, sources in UPDATE_STEPS.items() for src in sources]


def _force_update_status(gate, uid, status):
    from sqlalchemy import update

    with gate.engine.begin() as conn:
        conn.execute(update(prompt_update).where(prompt_update.c.id == uid).values(status=status))


@pytest.mark.parametrize("src,to", [(s, t) for s in UpdateStatus for t in UpdateStatus])
def test_every_update_transition(gate, tmp_path, src, to):
    setup_gate(gate, tmp_path)
    uid = gate.submit(spec())
    _force_update_status(gate, uid, src)
    legal = (src, to) in _legal_update_pairs()
    with gate.engine.begin() as conn:
        if legal:
            transition_update(conn, uid, to, "r")
        else:
            with pytest.raises(IllegalTransition):
                transition_update(conn, uid, to, "r")
    assert gate.status(uid).status == (to if legal else src)


@pytest.mark.parametrize("src,to", [(s, t) for s in RunStatus for t in RunStatus])
def test_every_run_transition(gate, tmp_path, src, to):
    from sqlalchemy import update

    setup_gate(gate, tmp_path)
    uid = gate.submit(spec())
    run_id = gate.status(uid).runs[0].run_id
    with gate.engine.begin() as conn:
        conn.execute(update(prompt_run).where(prompt_run.c.id == run_id).values(status=src))
    legal = src in RUN_STEPS.get(to, ())
    with gate.engine.begin() as conn:
        if legal:
            transition_run(conn, run_id, to)
        else:
            with pytest.raises(IllegalTransition):
                transition_run(conn, run_id, to)
    assert gate.status(uid).runs[0].status == (to if legal else src)


def test_run_transition_guarded_by_lease_token(gate, tmp_path):
    setup_gate(gate, tmp_path)
    gate.submit(spec())
    with gate.engine.begin() as conn:
        ((run, token),) = claim_materialize(conn, 30)
    with gate.engine.begin() as conn:
        with pytest.raises(IllegalTransition, match="lease"):
            transition_run(conn, run.id, RunStatus.RUNNING, token="0" * 32)
        transition_run(conn, run.id, RunStatus.RUNNING, token=token)


def test_spec_errors_name_file_and_field(tmp_path):
    from gate.prompt.spec import load_spec

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: p1\nmodel: m\nmessages: [{role: user, content: hi}]\ntemperature: 1\n")
    with pytest.raises(SpecError) as err:
        load_spec(bad)
    assert err.value.file == str(bad) and err.value.field == "temperature"
    bad.write_text("name: p1\nmodel: [unclosed\n")
    with pytest.raises(SpecError, match="malformed YAML: line"):
        load_spec(bad)
    with pytest.raises(SpecError, match="no such file"):
        load_spec(tmp_path / "missing.yaml")
