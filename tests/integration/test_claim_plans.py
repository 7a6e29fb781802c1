"""Claim queries on MariaDB: index range scans without filesort on tables with thousands
of rows (EXPLAIN), and the race a SKIP LOCKED subquery would open: a row locked by a claim
in progress must not make a run look finished, nor an update look reconcilable."""

from __future__ import annotations

import time
from contextlib import contextmanager
from datetime import datetime

import pytest
from sqlalchemy import insert, text, update
from support.helpers import setup_gate, spec
from support.migrated import migrated

from gate.states import RunStatus, UpdateStatus
from gate.store.items import claim_items, claim_items_from, item_claim_query, release_items
from gate.store.runs import (
    finalizable_runs,
    finalize_candidates_query,
    get_run,
    lock_run_query,
    materialize_claim_query,
    transition_run,
)
from gate.store.schema import dataset, prompt_run, prompt_run_item, prompt_update
from gate.store.updates import get_update, lock_update_query, reconcilable_updates, reconcile_candidates_query
from gate.store.versions import version_inputs

E = datetime(2000, 1, 1)


@pytest.fixture
def big_tables(mysql_gate):
    """2,000 updates, 4,000 runs, 8,000 items in a mix of states, analyzed."""
    g = mysql_gate
    with g.engine.begin() as c:
        c.execute(insert(dataset).values(id=1, name="d", source_uri="x", options={}, created_at=E))
        c.execute(
            insert(prompt_update),
            [
                dict(
                    id=u,
                    prompt_name="p",
                    mode="check",
                    status=["APPLIED", "RUNNING", "PENDING", "REJECTED"][u % 4],
                    candidate_config={},
                    candidate_hash="h",
                    base_version=0,
                    source={},
                    source_key=str(u),
                    created_at=E,
                )
                for u in range(1, 2001)
            ],
        )
        c.execute(
            insert(prompt_run),
            [
                dict(
                    id=u * 2 + k,
                    update_id=u,
                    dataset_id=1,
                    dataset_name="d",
                    source_uri="x",
                    source_options={},
                    status=["DONE", "RUNNING", "PENDING", "DONE"][u % 4],
                    min_accuracy="0.5",
                    row_count=0,
                    lease_until=E,
                    attempt=0,
                    created_at=E,
                    materialized_at=(E if u % 8 == 1 else None) if u % 4 != 0 else E,
                )
                for u in range(1, 2001)
                for k in (0, 1)
            ],
        )
        c.execute(
            insert(prompt_run_item),
            [
                dict(
                    run_id=r,
                    position=i,
                    item_id=f"{r}-{i}",
                    input={},
                    expected_decision="yes",
                    verdict=["PENDING", "MATCH"][i % 2],
                    attempt=0,
                    lease_until=E,
                )
                for r in range(2, 402)
                for i in range(20)
            ],
        )
        c.execute(text("ANALYZE TABLE prompt_run, prompt_run_item, prompt_update"))
    return g


CLAIMS = {
    "execute: ready items of a run": lambda: item_claim_query(3, 32, 3),
    "materialize: RUNNING runs needing pages": lambda: materialize_claim_query(RunStatus.RUNNING, 1),
    "materialize: PENDING runs": lambda: materialize_claim_query(RunStatus.PENDING, 1),
    "finalize: candidate runs": lambda: finalize_candidates_query(20),
    "finalize: lock one run": lambda: lock_run_query(3),
    "reconcile: candidate updates": lambda: reconcile_candidates_query(20),
    "reconcile: lock one update": lambda: lock_update_query(1),
}


@pytest.mark.parametrize("name", CLAIMS)
def test_claim_queries_use_an_index_without_filesort(big_tables, name):
    sql = str(CLAIMS[name]().compile(big_tables.engine, compile_kwargs={"literal_binds": True}))
    with big_tables.engine.connect() as conn:
        plan = conn.execute(text("EXPLAIN " + sql)).mappings().all()
    for row in plan:
        assert row["type"] in ("range", "ref", "const", "eq_ref", "index_subquery", "unique_subquery"), (name, plan)
        assert row["key"], (name, plan)
        assert "filesort" not in (row["Extra"] or ""), (name, plan)


def test_the_item_claim_reads_its_index_alone(big_tables):
    """The locking scan of a claim reads ix_item_ready and nothing else ("Using index"):
    it steps over the entries that scored items leave behind until purge (and, in a run
    of a million items, over more of them the longer the run) at the index's cost only,
    never reading an item's row to reject it."""
    sql = str(item_claim_query(3, 32, 3).compile(big_tables.engine, compile_kwargs={"literal_binds": True}))
    with big_tables.engine.connect() as conn:
        (plan,) = conn.execute(text("EXPLAIN " + sql)).mappings().all()
    assert plan["key"] == "ix_item_ready" and "Using index" in (plan["Extra"] or "").split("; "), plan


def test_the_claim_from_a_position_reads_a_range_of_its_index_alone(big_tables):
    """``claim_items_from`` (what an executor claims while it goes through a run front to
    back) is a range of ix_item_ready from the position given, in the index's order (no
    filesort): its scan starts past the entries the items claimed before left behind,
    rather than stepping over every one purge has not taken yet."""
    from gate.store.item_claims import item_claim_from_sql

    with big_tables.engine.connect() as conn:
        (plan,) = conn.execute(text("EXPLAIN " + item_claim_from_sql(3, 5, 32))).mappings().all()
    assert plan["key"] == "ix_item_ready" and plan["type"] == "range", plan
    assert "filesort" not in (plan["Extra"] or ""), plan


def _materialized(db_url, tmp_path, rows: int):
    import threading

    from gate.domain import Gate
    from workers.materialize import Materializer

    g = Gate.connect(migrated(db_url), upgrade=True)
    setup_gate(g, tmp_path, datasets=(("d1", rows, "0.5"),))
    uid = g.submit(spec())
    materializer = Materializer(g.engine, g.settings, threading.Event())
    while materializer.poll() == 0:
        pass
    return g, g.status(uid).runs[0].run_id


def test_a_claim_from_a_position_takes_never_leased_items_from_there_in_order(db_url, tmp_path):
    """From position 3: items 3, 4, 5 with their inputs, in order; item 4 given back by a
    drain (never called) is claimed again from there; item 7 whose lease ran out, and
    items before the position, are not its to take: ``claim_items`` takes them (the
    executor falls back to it once this finds nothing)."""
    g, run_id = _materialized(db_url, tmp_path, 10)
    items = prompt_run_item
    with g.engine.begin() as c:  # item 7: leased by a worker whose lease ran out
        c.execute(
            update(items)
            .where(items.c.run_id == run_id, items.c.position == 7)
            .values(lease_until=datetime(2001, 1, 1), attempt=1)
        )
    with g.engine.begin() as c:
        token, first = claim_items_from(c, run_id, 3, 3, 30, 3)
    assert [(i.position, i.item_id, i.attempt) for i in first] == [(3, "i3", 1), (4, "i4", 1), (5, "i5", 1)]
    with g.engine.connect() as c:  # the inputs: with the items (SQLite), else read by the chunk's renderer
        version = get_run(c, run_id).dataset_version_id
        inputs = {i.position: i.input or version_inputs(c, version, [i.position])[i.position] for i in first}
    assert inputs == {n: {"text": f"item number {n}"} for n in (3, 4, 5)}
    with g.engine.begin() as c:
        assert release_items(c, token, run_id, [4]) == 1
    with g.engine.begin() as c:
        _, again = claim_items_from(c, run_id, 4, 10, 30, 3)
    assert [i.position for i in again] == [4, 6, 8, 9]  # 7's lease ran out: not a never-leased item
    with g.engine.begin() as c:
        _, rest = claim_items(c, run_id, 10, 30, 3)
    assert sorted(i.position for i in rest) == [0, 1, 2, 7]


def test_a_claim_ends_an_item_at_its_attempt_cap_and_hands_out_the_rest_with_their_inputs(db_url, tmp_path):
    from gate.domain import Gate

    g = Gate.connect(migrated(db_url), upgrade=True)
    setup_gate(g, tmp_path, datasets=(("d1", 3, "0.5"),))
    uid = g.submit(spec())
    import threading

    from workers.materialize import Materializer

    materializer = Materializer(g.engine, g.settings, threading.Event())
    while materializer.poll() == 0:
        pass
    run_id = g.status(uid).runs[0].run_id
    with g.engine.begin() as c:  # item i0: every attempt claimed and lost
        c.execute(
            update(prompt_run_item)
            .where(prompt_run_item.c.run_id == run_id, prompt_run_item.c.position == 0)
            .values(attempt=3)
        )
    with g.engine.begin() as c:
        token, items = claim_items(c, run_id, 10, 30, 3)
    assert [(i.item_id, i.attempt, i.input) for i in items] == [
        ("i1", 1, {"text": "item number 1"}),
        ("i2", 1, {"text": "item number 2"}),
    ]
    with g.engine.connect() as c:
        rows = (
            c.execute(
                prompt_run_item.select().where(prompt_run_item.c.run_id == run_id).order_by(prompt_run_item.c.position)
            )
            .mappings()
            .all()
        )
    assert [(r["verdict"], r["error"]) for r in rows] == [
        ("ERROR", "no result after every attempt"),
        ("PENDING", None),
        ("PENDING", None),
    ]
    assert rows[1]["lease_token"] == token and rows[0]["lease_token"] is None
    g.close()


def _running_run_with_one_pending_item(g, tmp_path):
    setup_gate(g, tmp_path, datasets=(("d1", 2, "0.5"),))
    uid = g.submit(spec())
    run_id = g.status(uid).runs[0].run_id
    with g.engine.begin() as c:
        c.execute(
            insert(prompt_run_item),
            [
                dict(run_id=run_id, position=k, item_id=item_id, input={}, expected_decision="yes", lease_until=E)
                for k, item_id in enumerate(("a", "b"))
            ],
        )
        c.execute(update(prompt_update).where(prompt_update.c.id == uid).values(status="RUNNING"))
        c.execute(update(prompt_run).where(prompt_run.c.id == run_id).values(status="RUNNING", materialized_at=E))
        c.execute(update(prompt_run_item).where(prompt_run_item.c.item_id == "a").values(verdict="MATCH"))
    return uid, run_id


@contextmanager
def _open_transaction(g):
    """A connection inside a transaction that holds whatever it locks until the block ends
    (then rolls back): another worker's claim or lock in progress."""
    conn = g.engine.connect()
    txn = conn.begin()
    try:
        yield conn
    finally:
        txn.rollback()
        conn.close()


def test_a_claim_in_progress_does_not_make_a_run_look_finished(mysql_gate, tmp_path):
    g = mysql_gate
    uid, run_id = _running_run_with_one_pending_item(g, tmp_path)
    with _open_transaction(g) as claimer:
        token, items = claim_items(claimer, run_id, 10, 30, 3)  # holds the PENDING item's lock
        assert [i.item_id for i in items] == ["b"]
        with g.engine.begin() as c:
            assert finalizable_runs(c, 20) == []


def test_a_locked_running_run_does_not_make_its_update_look_done(mysql_gate, tmp_path):
    g = mysql_gate
    uid, run_id = _running_run_with_one_pending_item(g, tmp_path)
    with _open_transaction(g) as holder:
        assert holder.execute(lock_run_query(run_id)).first() is not None  # e.g. a finalizer at work
        with g.engine.begin() as c:
            assert reconcilable_updates(c, 20) == []
    with g.engine.begin() as c:
        transition_run(c, run_id, RunStatus.DONE, metrics={"matches": 1, "scored": 1})
    with g.engine.begin() as c:
        assert reconcilable_updates(c, 20) == [uid]
        assert get_update(c, uid).status == UpdateStatus.RUNNING


def test_a_frozen_transaction_does_not_hold_its_row_locks_forever(mysql_url):
    """A session idle inside a transaction (its process frozen) is ended by MariaDB after
    the bound, and the row it locked can be claimed again."""
    from sqlalchemy.exc import DBAPIError

    from gate.db import make_engine

    engine = make_engine(mysql_url, idle_transaction_seconds=2)
    try:
        with engine.begin() as c:
            c.execute(text("CREATE TABLE IF NOT EXISTS frozen_lock (id INT PRIMARY KEY)"))
            c.execute(text("DELETE FROM frozen_lock"))
            c.execute(text("INSERT INTO frozen_lock VALUES (1)"))
        frozen = engine.connect()
        frozen.begin()
        frozen.execute(text("SELECT id FROM frozen_lock WHERE id = 1 FOR UPDATE"))
        with engine.connect() as other:
            assert other.execute(text("SELECT id FROM frozen_lock FOR UPDATE SKIP LOCKED")).all() == []
            other.rollback()
            time.sleep(3.5)  # the frozen one does nothing meanwhile
            assert other.execute(text("SELECT id FROM frozen_lock FOR UPDATE SKIP LOCKED")).all() == [(1,)]
            other.rollback()
        with pytest.raises(DBAPIError):
            frozen.execute(text("SELECT 1"))  # its session was ended
        frozen.invalidate()
    finally:
        engine.dispose()
