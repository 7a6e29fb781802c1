"""The stop of an update against the work in flight, statement by statement on MariaDB and
SQLite: a write-back of items claimed before the stop writes nothing (its lease token is
gone), so a STOPPED item is never resurrected nor counted in the tally; one stopper wins;
the stop reaches the update's other runs, a run not yet materialized included, and
materialize gives such a run no page."""

from __future__ import annotations

import threading

from support.helpers import rules_spec, write_rule_rows

from gate.db import transaction
from gate.records import ItemResult
from gate.states import Verdict
from gate.store.items import claim_items, write_item_results
from gate.store.runs import finalizable_runs, get_run, runs_of_update
from gate.store.schema import prompt_run_item
from gate.store.stops import add_tally, read_tally, stop_update, stripe_of
from gate.store.updates import get_update
from workers.materialize import Materializer


def staged(gate, tmp_path, datasets=("d1", "d2")):
    for name in datasets:
        gate.register_dataset(name, str(write_rule_rows(tmp_path / f"{name}.csv", 12)))
        gate.map_dataset("p1", name, "0.5")
    uid = gate.submit(rules_spec("p1"))
    return uid, [r.run_id for r in gate.status(uid).runs]


def verdicts(gate, run_id):
    i = prompt_run_item
    with gate.engine.connect() as conn:
        rows = conn.execute(prompt_run_item.select().where(i.c.run_id == run_id)).all()
    return sorted(r.verdict for r in rows)


def test_a_write_back_in_flight_cannot_resurrect_a_stopped_item(gate, tmp_path):
    uid, (first, second) = staged(gate, tmp_path)
    Materializer(
        gate.engine, gate.settings, threading.Event()
    ).poll()  # the first run's items; the second stays PENDING
    token, items = transaction(gate.engine, lambda conn: claim_items(conn, first, 4, 30, 3))
    assert len(items) == 4
    stopped = transaction(
        gate.engine,
        lambda conn: stop_update(
            conn, uid, "early_stop", first, {"kind": "early_stop", "run_id": first}, "with_update"
        ),
    )
    assert stopped == {first: 12, second: 0}  # claimed ones too: their calls' answers are dropped
    again = transaction(gate.engine, lambda conn: stop_update(conn, uid, "spend_cap", second, {}, "spend_cap"))
    assert again == {}  # one stopper wins

    results = [ItemResult(i.position, Verdict.MATCH, actual_decision=i.expected_decision, calls=1) for i in items]

    def write(conn):
        written = write_item_results(conn, first, token, results)
        add_tally(conn, first, stripe_of(token), [i.position for i in items] if written else None, None, 4)
        return written

    assert transaction(gate.engine, write) == 0  # the lease token is gone: nothing written
    assert verdicts(gate, first) == ["STOPPED"] * 12
    with gate.engine.connect() as conn:
        assert read_tally(conn, first) == ([], 4)  # the calls were made; no outcome counted
        runs = {r.id: r for r in runs_of_update(conn, uid)}
        assert runs[first].stopped == "early_stop" and runs[second].stopped == "with_update"
        assert runs[first].materialized_at is not None and runs[second].status == "PENDING"
        assert get_update(conn, uid).stopped == {"kind": "early_stop", "run_id": first}
        assert finalizable_runs(conn, 10) == [first]  # nothing PENDING: finalize may take it at once


def test_a_stopped_run_not_yet_materialized_gets_no_page(gate, tmp_path):
    uid, (first, second) = staged(gate, tmp_path)
    Materializer(gate.engine, gate.settings, threading.Event()).poll()
    transaction(
        gate.engine, lambda conn: stop_update(conn, uid, "spend_cap", first, {"kind": "spend_cap"}, "spend_cap")
    )
    Materializer(gate.engine, gate.settings, threading.Event()).poll()  # claims the second run: stopped, so no page
    assert verdicts(gate, second) == []
    with gate.engine.connect() as conn:
        run = get_run(conn, second)
        assert run.status == "RUNNING" and run.materialized_at is not None and run.stopped == "spend_cap"
        assert sorted(finalizable_runs(conn, 10)) == [first, second]
