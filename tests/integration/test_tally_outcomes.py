"""The tally a write-back adds from the results in hand (``add_tally(outcomes=...)``: no
re-read of the items it just wrote) is the tally the items themselves give
(``outcome_counts``, what reconcile confirms an early stop by), on MariaDB and SQLite: by
verdict, label, answer and the paired live run's verdict at each position, a retry
(PENDING) not counted, an ERROR without an answer counted with '', and a decision counted
without labels."""

from __future__ import annotations

import threading

from support.helpers import rules_spec, write_rule_rows

from gate.db import transaction
from gate.records import ItemResult
from gate.states import Verdict
from gate.store.items import claim_items, write_item_results
from gate.store.stops import add_tally, outcome_counts, read_tally, stripe_of
from workers.execute.results import tally_outcomes
from workers.materialize import Materializer


def two_runs(gate, tmp_path):
    """Two runs over one dataset version of 12 items (an apply and a check), materialized."""
    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 12)))
    gate.map_dataset("p1", "d", "0.5")
    runs = [gate.status(gate.submit(rules_spec("p1"), mode)).runs[0].run_id for mode in ("apply", "check")]
    materializer = Materializer(gate.engine, gate.settings, threading.Event())
    while materializer.poll() == 0:
        pass
    return runs


def result(item, n: int) -> ItemResult:
    """A mix: right, wrong (two answers), an ERROR without an answer, a retry."""
    kind = n % 5
    if kind == 0:
        return ItemResult(item.position, Verdict.MATCH, actual_decision=item.expected_decision, calls=1)
    if kind in (1, 2):
        return ItemResult(item.position, Verdict.MISMATCH, actual_decision=f"maybe{kind}", calls=1)
    if kind == 3:
        return ItemResult(item.position, Verdict.ERROR, error="http_error: boom", calls=1)
    return ItemResult(item.position, Verdict.PENDING, error="timeout: slow", retry_in=30.0, calls=1)


def write_back(gate, run_id: int, live_run_id, by_label: bool, shift: int) -> None:
    """Claim the run's items and write them back in two batches, each with its tally."""
    token, items = transaction(gate.engine, lambda conn: claim_items(conn, run_id, 12, 30, 3))
    assert len(items) == 12
    results = [result(item, n + shift) for n, item in enumerate(items)]
    for part, batch in enumerate((results[:7], results[7:])):

        def write(conn, batch=batch, part=part):
            assert write_item_results(conn, run_id, token, batch) == len(batch)
            add_tally(
                conn,
                run_id,
                stripe_of(token, part),
                None,
                live_run_id,
                len(batch),
                by_label,
                settled=len(batch),
                outcomes=tally_outcomes(batch, items),
            )

        transaction(gate.engine, write)


def test_the_tally_from_the_results_in_hand_is_the_items_tally(gate, tmp_path):
    live, candidate = two_runs(gate, tmp_path)
    write_back(gate, live, None, False, shift=2)  # counted without labels, no live run
    write_back(gate, candidate, live, True, shift=0)  # by label, against the live run's verdicts
    with gate.engine.connect() as conn:
        for run_id, live_id, by_label in ((live, None, False), (candidate, live, True)):
            rows, calls = read_tally(conn, run_id)
            expected = outcome_counts(conn, run_id, live_id, by_label)
            assert sorted(rows) == sorted(expected) and calls == 12
            assert sum(n for *_, n in rows) == 10  # the two retries are not counted
        paired = read_tally(conn, candidate)[0]
        assert {lv for *_, lv, _ in paired} == {"MATCH", "MISMATCH", "ERROR", "PENDING"}  # the live run's, as they are
        assert any(v == Verdict.ERROR and a is None for v, _, a, _, _ in paired)  # no answer: '' in the tally
        assert all(e == "" and a is None for _, e, a, _, _ in read_tally(conn, live)[0])
