"""The calls that "may have been made by workers that died" (``store.stops.unrecorded_claims``),
on MariaDB and SQLite: per executor that claimed, its claims no write-back settled, but no
more than the bound it recorded with them (issue 51: a claim counts its items before any
call, and the items queued behind the calls in flight made the figure several times the
truth). Claims recorded before, naming no executor, each count."""

from __future__ import annotations

from support.helpers import rules_spec, write_rule_rows

from gate.db import transaction
from gate.store.stops import add_tally, read_tally, record_bound, unrecorded_claims


def test_each_executors_unsettled_claims_count_up_to_its_bound(gate, tmp_path):
    gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 4)))
    gate.map_dataset("p1", "d1", "0.5")
    run_id = gate.status(gate.submit(rules_spec("p1"))).runs[0].run_id

    def tally(stripe: int, **amounts) -> None:
        transaction(gate.engine, lambda conn: add_tally(conn, run_id, stripe, None, None, 0, **amounts))

    a, b, c = {"claimer": "a" * 16, "bound": 16}, {"claimer": "b" * 16, "bound": 16}, {"claimer": "c" * 16, "bound": 4}
    tally(1, claimed=32, **a)
    tally(2, claimed=32, **a)
    tally(3, settled=20, **a)  # killed with 44 claims unsettled: at most 16 of them called
    tally(4, claimed=32, **b)
    tally(4, claimed=-20, **b)  # a drain gave 20 back uncalled
    tally(5, settled=5, **b)  # 7 unsettled: under its bound
    tally(6, claimed=10, **c)
    tally(7, settled=10, **c)  # all settled
    tally(8, claimed=5)  # before issue 51: no executor named, each claim counts
    d = {"claimer": "d" * 16}
    tally(9, claimed=32, bound=8, **d)  # its bound grew as its answers waited for their write-back:
    tally(10, settled=2, bound=9, **d)  # its largest on record counts
    transaction(gate.engine, lambda conn: record_bound(conn, run_id, "d" * 16, 11))  # raised by another run's commit
    with gate.engine.connect() as conn:
        assert unrecorded_claims(conn, run_id) == 16 + 7 + 0 + 5 + 11
        assert read_tally(conn, run_id) == ([], 0)  # the claims are not outcomes nor calls


def test_a_write_back_counted_from_its_results_settles_its_own_executors_claims(gate, tmp_path):
    """A write-back's SETTLED row, added with its counted items (``outcomes``: the tally from
    the results in hand), names its executor as the claim did: settled under no executor, the
    claims would stay open under their own and the figure would count them."""
    gate.register_dataset("d2", str(write_rule_rows(tmp_path / "d2.csv", 4)))
    gate.map_dataset("p2", "d2", "0.5")
    run_id = gate.status(gate.submit(rules_spec("p2"))).runs[0].run_id
    e = {"claimer": "e" * 16, "bound": 4}
    outcomes = [(0, "MATCH", "a", "a"), (1, "MISMATCH", "a", "b"), (2, "MATCH", "b", "b")]

    def claim(conn):
        add_tally(conn, run_id, 1, None, None, 0, claimed=5, **e)

    def write_back(conn):
        add_tally(conn, run_id, 2, None, None, 3, settled=3, outcomes=outcomes, **e)

    transaction(gate.engine, claim)
    transaction(gate.engine, write_back)
    with gate.engine.connect() as conn:
        assert unrecorded_claims(conn, run_id) == 2  # 5 claimed, 3 settled: 2 open, under its bound of 4
        assert read_tally(conn, run_id)[1] == 3
