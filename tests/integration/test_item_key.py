"""The item key (docs/architecture.md, "The item key"): a run's items are keyed by (run_id,
position), their ids unique per dataset version, so no run holds an item id twice — not
when a page is copied again after a lost commit, not when two materializers work on one
run, not from a version with a duplicate id, which is refused at import. And finalize
waits for the last page: a run whose first page is all scored while later pages are still
to be copied stays RUNNING (issue 38, points 7 and 8)."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import IntegrityError
from support.helpers import setup_gate, spec, write_csv

from gate.db import transaction
from gate.errors import GateError
from gate.states import RunStatus, Verdict
from gate.store.items import copy_version_page
from gate.store.runs import claim_materialize, get_run
from gate.store.schema import dataset_row, prompt_run_item
from gate.store.versions import get_version
from workers.finalize import Finalizer
from workers.materialize import LeaseLost, Materializer


def ids_of(gate, run_id: int) -> tuple[int, int, int]:
    """(items, distinct item ids, distinct positions) of the run."""
    i = prompt_run_item
    with gate.engine.connect() as conn:
        return tuple(
            conn.execute(
                select(func.count(), func.count(i.c.item_id.distinct()), func.count(i.c.position.distinct())).where(
                    i.c.run_id == run_id
                )
            ).one()
        )


def submitted(gate, tmp_path, rows: int) -> tuple[int, int]:
    """(update id, run id) of a submission on a dataset of ``rows`` rows, nothing copied yet."""
    setup_gate(gate, tmp_path, datasets=(("d1", rows, "0.5"),))
    uid = gate.submit(spec())
    return uid, gate.status(uid).runs[0].run_id


def test_a_page_copied_again_is_refused_by_the_key(gate, tmp_path):
    """A page whose COMMIT was lost in flight is run again: had the first run committed,
    the copy collides on (run_id, position) and inserts nothing (the materializer asks
    first, ``store.runs.page_committed``; the key is what holds when nothing asks)."""
    _, run_id = submitted(gate, tmp_path, 10)
    with gate.engine.connect() as conn:
        version = get_run(conn, run_id).dataset_version_id
    with gate.engine.begin() as conn:
        assert copy_version_page(conn, run_id, version, 0, 10) == 10
    with pytest.raises(IntegrityError), gate.engine.begin() as conn:
        copy_version_page(conn, run_id, version, 5, 10)
    assert ids_of(gate, run_id) == (10, 10, 10)


def test_a_materializer_whose_lease_ran_out_copies_nothing(gate, tmp_path):
    """Its run lease ran out under it and another materializer took the run and copied its
    pages: the late one's page writes nothing (its cursor advance is guarded by its token,
    so its transaction rolls back; were the other's rows there first, the key refuses it)."""
    _, run_id = submitted(gate, tmp_path, 300)
    settings = gate.settings.with_(page_size=50)
    ((run, stale_token),) = transaction(gate.engine, lambda conn: claim_materialize(conn, 0.2, 1))
    threading.Event().wait(0.3)  # its lease runs out
    Materializer(gate.engine, settings, threading.Event()).poll()  # another takes the run and copies it
    with gate.engine.connect() as conn:
        version = get_version(conn, run.dataset_version_id)
    late = Materializer(gate.engine, settings, threading.Event())
    with pytest.raises((LeaseLost, IntegrityError)):
        late.copy_page(run, stale_token, version, 0, 50, {}, first=True)
    assert ids_of(gate, run_id) == (300, 300, 300)


def test_two_materializers_racing_on_one_run_copy_each_row_once(gate, tmp_path):
    _, run_id = submitted(gate, tmp_path, 300)
    settings = gate.settings.with_(page_size=50, lease_seconds=0.5)  # leases that run out mid-run
    racers = [Materializer(gate.engine, settings, threading.Event()) for _ in range(2)]

    def materialize(m: Materializer) -> None:
        for _ in range(400):
            with gate.engine.connect() as conn:
                if get_run(conn, run_id).materialized_at is not None:
                    return
            try:
                m.poll()
            except Exception:  # a page the other copied first: the key refused it, try again
                pass

    threads = [threading.Thread(target=materialize, args=(m,)) for m in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert ids_of(gate, run_id) == (300, 300, 300)


def test_a_version_with_a_duplicate_id_is_refused_at_import_and_by_its_key(gate, tmp_path):
    path = write_csv(tmp_path / "dup.csv", 4)
    path.write_text(path.read_text() + "i2,yes,item number 2 again\n")
    with pytest.raises(GateError, match="i2"):
        gate.register_dataset("dup", str(path))
    assert "dup" not in {d.name for d, _ in gate.list_datasets()}
    _, run_id = submitted(gate, tmp_path, 4)
    with gate.engine.connect() as conn:
        version = get_run(conn, run_id).dataset_version_id
    with pytest.raises(IntegrityError), gate.engine.begin() as conn:  # what holds if an import did not ask
        conn.execute(
            insert(dataset_row).values(
                version_id=version, position=4, item_id="i2", expected_decision="yes", input={}, row_hash="0" * 64
            )
        )


def test_finalize_waits_for_the_last_page(gate, tmp_path):
    """The first page copied and every item of it scored, later pages still to be copied: the
    run has no PENDING item, and finalize leaves it RUNNING (``materialized_at`` is not set
    until the last page is in); once the rest is copied and scored it ends DONE over every row."""
    uid, run_id = submitted(gate, tmp_path, 300)
    ((run, token),) = transaction(gate.engine, lambda conn: claim_materialize(conn, 30, 1))
    with gate.engine.connect() as conn:
        version = get_version(conn, run.dataset_version_id)
    materializer = Materializer(gate.engine, gate.settings, threading.Event())
    materializer.copy_page(run, token, version, 0, 128, {}, first=True)

    def score_all() -> None:
        with gate.engine.begin() as conn:
            conn.execute(
                update(prompt_run_item)
                .where(prompt_run_item.c.run_id == run_id, prompt_run_item.c.verdict == Verdict.PENDING)
                .values(verdict=Verdict.MATCH, actual_decision=prompt_run_item.c.expected_decision)
            )

    score_all()
    finalizer = Finalizer(gate.engine, gate.settings, threading.Event())
    finalizer.poll()
    status = gate.status(uid).runs[0]
    assert (status.status, status.total) == (RunStatus.RUNNING, 128)
    materializer.copy_page(run, token, version, 128, 300, {}, first=False)
    score_all()
    finalizer.poll()
    status = gate.status(uid).runs[0]
    assert (status.status, status.total, status.matches) == (RunStatus.DONE, 300, 300)
