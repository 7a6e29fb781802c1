"""Rollback on MariaDB: an earlier version live again as a new version, in one guarded
transaction, recorded with who and why; open apply-mode updates cancelled; production's
runtime sees it within its TTL; and a race of rollback against apply (reconcile) and a
second rollback leaves exactly one winner each time, versions strictly increasing, no
history lost."""

from __future__ import annotations

import random
import threading
import time

import pytest
from support.helpers import rules_spec, write_rule_rows

from gate import db
from gate.domain import Gate
from gate.errors import IllegalTransition, UsageError
from gate.runtime import PromptRuntime
from gate.states import UpdateStatus
from gate.store.live import prompt_history
from gate.store.runs import BASELINE, runs_of_update
from workers.reconcile import reconcile_batch
from workers.supervisor import WorkerProcess, run_until_terminal


def applied(gate: Gate, description: str, name: str = "p1") -> int:
    update_id = gate.submit(rules_spec(name, description), "apply")
    (report,) = run_until_terminal(gate, [update_id], timeout=60)
    assert report.status == UpdateStatus.APPLIED, report.update.reason
    return update_id


def test_rollback_restores_an_earlier_config_as_a_new_version(mysql_gate, tmp_path, model):
    gate = mysql_gate
    gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 4)))
    gate.map_dataset("p1", "d1", "0.5")
    first, second = applied(gate, "A"), applied(gate, "B")
    runtime = PromptRuntime(gate=gate, ttl=0.5)
    assert runtime.prompt("p1").current.spec.description == "B"
    open_update = gate.submit(rules_spec("p1", "C"), "apply")
    check_update = gate.submit(rules_spec("p1", "D"), "check")

    done = gate.rollback("p1", reason="B mislabels refunds", actor="alice")
    assert done == {"version": 3, "restored_version": 1, "cancelled": [open_update], "held": True}
    live = gate.live("p1")
    assert (live.version, live.config["description"], live.applied_update_id) == (3, "A", first)
    cancelled = gate.status(open_update)
    assert cancelled.status == UpdateStatus.CANCELLED and "rolled back to version 1" in cancelled.update.reason
    assert gate.status(check_update).status == UpdateStatus.PENDING  # a check changes nothing live

    deadline = time.monotonic() + 0.5 + 1.0
    while runtime.prompt("p1").current.spec.description != "A":
        assert time.monotonic() < deadline, "the runtime did not see the rollback within its TTL"
        time.sleep(0.05)

    history = gate.history("p1")
    assert [(h["version"], h["kind"]) for h in history] == [(3, "rollback"), (2, "apply"), (1, "apply")]
    assert (history[0]["restored_version"], history[0]["actor"], history[0]["reason"]) == (
        1,
        "alice",
        "B mislabels refunds",
    )
    assert history[1]["update"]["id"] == second and history[1]["update"]["status"] == "APPLIED"
    assert history[1]["update"]["runs"][0]["scored"] == 4

    with pytest.raises(IllegalTransition):
        gate.rollback("p1", reason="stale view", actor="bob", seen_version=2)
    with pytest.raises(UsageError):
        gate.rollback("p1", reason="", actor="bob")
    with pytest.raises(UsageError):
        gate.rollback("p1", reason="to the future", actor="bob", to_version=3)
    assert gate.live("p1").version == 3 and len(gate.history("p1")) == 3


def test_a_rollback_reads_as_one_in_the_cli_the_api_and_the_page(service, tmp_path, model):
    """`promptgate live`, GET /v1/prompts/NAME/live and the prompt page say "rollback to v1
    by alice, reason: …", not "applied by update #1" (the update whose config it restored)."""
    from support.cli import run_cli

    gate = Gate.connect(service.db_url)
    try:
        gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 4)))
        gate.map_dataset("p1", "d1", "0.5")
        first = applied(gate, "A")
        applied(gate, "B")
        gate.rollback("p1", reason="B mislabels refunds", actor="alice")
    finally:
        gate.close()
    out = run_cli("live", "p1", "--database-url", service.db_url)
    assert out.returncode == 0, out.stderr
    head = out.stdout.splitlines()[0]
    assert head.startswith("p1 v3 — rollback to v1 by alice, reason: B mislabels refunds ("), head
    assert f"update {first}" not in head
    remote = run_cli("live", "p1", "--gate-url", service.url, env={"PROMPTGATE_TOKEN": service.tokens["read"]})
    assert remote.returncode == 0 and remote.stdout.splitlines()[0] == head, remote.stderr
    with service.client("read") as web:
        api = web.get("/v1/prompts/p1/live").json()
        assert (api["kind"], api["restored_version"], api["actor"], api["reason"]) == (
            "rollback",
            1,
            "alice",
            "B mislabels refunds",
        )
        page = " ".join(web.get("/prompts/p1").text.split())
    assert "rollback to v1 by alice, reason: B mislabels refunds" in page
    assert f'applied by <a href="/updates/{first}">' not in page


def runs_done(gate: Gate, update_id: int, timeout: float = 30) -> None:
    """Wait until every run of the update (the baseline's too) is finished, the update
    itself still RUNNING: ready for reconcile."""
    deadline = time.monotonic() + timeout
    while True:
        with gate.engine.connect() as conn:
            runs = runs_of_update(conn, update_id) + runs_of_update(conn, update_id, BASELINE)
        if runs and all(r.status == "DONE" for r in runs):
            return
        assert time.monotonic() < deadline, f"update {update_id}'s runs did not finish"
        time.sleep(0.005)


def race_round(gate: Gate, rng: random.Random, seen: int) -> dict:
    """Reconcile an update ready to apply while one or two rollbacks of the version seen
    run at the same moment; returns who won."""
    outcome: dict = {"rollbacks": 0, "errors": []}
    start = threading.Barrier(3)

    def do_rollback(who: str):
        start.wait()
        time.sleep(rng.uniform(0, 0.01))
        try:
            gate.rollback("p1", reason=f"round by {who}", actor=who, seen_version=seen, to_version=1)
            outcome["rollbacks"] += 1
        except IllegalTransition:
            pass
        except Exception as exc:  # anything else is a failure of the test
            outcome["errors"].append(repr(exc))

    def do_apply():
        start.wait()
        # a rollback is a request now (a few transactions before it exists): the apply's start
        # spreads over that span, so that either may come first
        time.sleep(rng.uniform(0, 0.08))
        db.transaction(gate.engine, reconcile_batch)

    second = rng.random() < 0.5
    threads = [
        threading.Thread(target=do_rollback, args=("r1",)),
        threading.Thread(target=do_apply),
        threading.Thread(target=do_rollback, args=("r2",)) if second else threading.Thread(target=start.wait),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return outcome


# The race's rounds: at least MIN_ROUNDS, and on until each order (apply first, a rollback
# first) has won WINS_EACH of them, at most MAX_ROUNDS. The apply wins ~20-30 % of them here
# (quiet or loaded), so a run is ~50 rounds (100 before: 12 s of CPU, half of it saved); when
# one order turns rare under load the rounds go on, as far as the 100 there always were.
MIN_ROUNDS, WINS_EACH, MAX_ROUNDS = 50, 5, 100


def test_rollback_races_apply_and_another_rollback(mysql_gate, tmp_path, model):
    gate = mysql_gate
    gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 2)))
    gate.map_dataset("p1", "d1", "0.5")
    applied(gate, "v1"), applied(gate, "v2")
    rng = random.Random(16)
    worker = WorkerProcess(
        gate.engine,
        gate.settings.with_(poll_interval=0.005, poll_max_interval=0.02, idle_probe_interval=0.02),
        ["materialize", "execute", "finalize"],
        4,
    ).start()
    wins = {"apply": 0, "rollback": 0}
    try:
        for round_no in range(MAX_ROUNDS):
            if round_no >= MIN_ROUNDS and min(wins.values()) >= WINS_EACH:
                break  # both orders seen often enough; the rare one may take up to MAX_ROUNDS
            seen = gate.live("p1").version
            update_id = gate.submit(rules_spec("p1", f"candidate {round_no}"), "apply")
            runs_done(gate, update_id)
            outcome = race_round(gate, rng, seen)
            assert outcome["errors"] == []
            db.transaction(gate.engine, reconcile_batch)  # a reconcile that lost its lock window ends it now
            status = gate.status(update_id).status
            live, versions = gate.live("p1"), versions_of(gate, "p1")
            assert live.version == seen + 1, f"round {round_no}: version {live.version} after {seen}"
            assert [v["version"] for v in versions] == list(range(seen + 1, 0, -1)), "history lost or duplicated"
            (top,) = gate.history("p1", limit=1)
            if status == UpdateStatus.APPLIED:
                assert outcome["rollbacks"] == 0 and (top["kind"], top["update_id"]) == ("apply", update_id)
                wins["apply"] += 1
            else:
                assert outcome["rollbacks"] == 1, f"round {round_no}: {outcome} with the update {status}"
                assert status == UpdateStatus.CANCELLED and top["kind"] == "rollback"
                assert top["actor"] in ("r1", "r2") and live.config == versions[-1]["config"]
                wins["rollback"] += 1
    finally:
        worker.shutdown()
    assert wins["apply"] > 0 and wins["rollback"] > 0, wins  # both orders happened
    rounds = wins["apply"] + wins["rollback"]
    print(f"{rounds} rounds, won first: {wins}")
    history = gate.history("p1", limit=1000)  # the history the API gives: the same versions, read once
    assert [h["version"] for h in history] == [v["version"] for v in versions] == list(range(rounds + 2, 0, -1))


def versions_of(gate: Gate, name: str) -> list[dict]:
    """The rows ``gate.history`` is made of (newest first), without what it adds to each: its
    update's summary (two queries a version, ~10,000 over the 100 rounds), holds, rollouts."""
    with gate.engine.connect() as conn:
        return prompt_history(conn, name)
