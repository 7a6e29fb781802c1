"""Races for the live row (issue 47 point 5), on MariaDB with real processes: each round a
person's rollback (``Live.rollback``: its request carried out by the requester, no reconcile
worker being alive), an apply (reconcile's ``reconcile_batch``) and a canary's decision
(a ROLLED_BACK request, carried out by ``carry_out_pending``) all saw the same live version,
a canary, and start at one barrier in three processes. Exactly one moves the live row each
round; the other two end refused with their reason (the update FAILED or CANCELLED, the
requests REFUSED); the history stays gapless; and a held config is never live."""

from __future__ import annotations

import multiprocessing
import random
import time

from sqlalchemy import func, select
from support.canary import gate_config, prompt_spec

from gate import db, gateconfig
from gate.domain import Gate
from gate.errors import GateError
from gate.states import LiveRequestStatus, RolloutStatus, UpdateStatus
from gate.store.holds import holds_of
from gate.store.live import prompt_history
from gate.store.live_requests import canary_request, get_live_request, request_canary_decision
from gate.store.rollouts import active_rollout
from gate.store.runs import BASELINE, runs_of_update
from gate.store.schema import live_request
from workers.reconcile import carry_out_pending, reconcile_batch
from workers.supervisor import WorkerProcess

ROUNDS = 20
JITTER = 0.03  # seconds: at most this long after the barrier, each racer starts
HEAD_START = 0.1  # seconds: in a led round, the others start this much later than the leader
ROLES = ("rollback", "apply", "canary")
ROLLOUT = {"canary_percent": 10, "min_feedback": 100, "max_drop": 0.2, "confidence": 0.95, "max_hours": 48}


def racer(role: str, url: str, pipe, barrier) -> None:
    """A process of its own: each round, wait at the barrier with the others, then do its part."""
    gate = Gate.connect(url)
    try:
        while (job := pipe.recv()) is not None:
            barrier.wait(30)
            time.sleep(job["delay"])
            try:
                if role == "rollback":
                    gate.rollback("p1", reason="round", actor="alice", seen_version=job["seen"], to_version=job["to"])
                elif role == "apply":
                    db.transaction(gate.engine, reconcile_batch)
                else:
                    carry_out_pending(gate.engine)
                pipe.send("ok")
            except GateError as exc:
                pipe.send(f"refused: {exc}")
            except Exception as exc:  # a failure of the test: said to the parent
                pipe.send(f"error: {exc!r}")
    finally:
        gate.close()


def delays(round_no: int, rng: random.Random) -> dict[str, float]:
    """Each racer's start after the barrier. Even rounds are an open race (up to JITTER apart);
    odd rounds are led by each role in turn, the others starting HEAD_START later, so every
    role's win is checked even where one path is quicker than the others (the apply's is)."""
    jitter = {role: rng.uniform(0, JITTER) for role in ROLES}
    if round_no % 2 == 0:
        return jitter
    leader = ROLES[(round_no // 2) % len(ROLES)]
    return {role: t + (0 if role == leader else HEAD_START) for role, t in jitter.items()}


def runs_done(gate: Gate, update_id: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with gate.engine.connect() as conn:
            runs = runs_of_update(conn, update_id) + runs_of_update(conn, update_id, BASELINE)
        if runs and all(r.status == "DONE" for r in runs):
            return
        assert time.monotonic() < deadline, f"update {update_id}'s runs did not finish"
        time.sleep(0.005)


def a_canary_live(gate: Gate, round_no: int) -> None:
    """An apply made live by reconcile in this process: with the gate config's rollout, a canary."""
    update_id = gate.submit(prompt_spec(f"base {round_no}"), "apply")
    runs_done(gate, update_id)
    db.transaction(gate.engine, reconcile_batch)
    assert gate.status(update_id).status == UpdateStatus.APPLIED


def test_a_rollback_an_apply_and_a_canary_decision_race_and_exactly_one_wins(mysql_gate, tmp_path, model):
    gate = mysql_gate
    gateconfig.sync(gate, gate_config(tmp_path, ROLLOUT))
    fast = gate.settings.with_(poll_interval=0.005, poll_max_interval=0.02, idle_probe_interval=0.02)
    worker = WorkerProcess(gate.engine, fast, ["materialize", "execute", "finalize"], 4).start()
    fork = multiprocessing.get_context("fork")
    barrier = fork.Barrier(3)
    pipes, procs = {}, []
    for role in ROLES:
        mine, theirs = fork.Pipe()
        proc = fork.Process(target=racer, args=(role, gate.settings.database_url, theirs, barrier), daemon=True)
        proc.start()
        pipes[role], procs = mine, [*procs, proc]
    wins: dict[str, int] = dict.fromkeys(ROLES, 0)
    rng = random.Random(47)
    started = time.monotonic()
    try:
        a_canary_live(gate, 0)  # v1 goes live whole; v2 is the first canary
        for round_no in range(ROUNDS):
            with gate.engine.connect() as conn:
                rollout = active_rollout(conn, "p1")
            if rollout is None:
                a_canary_live(gate, round_no + 1)
                with gate.engine.connect() as conn:
                    rollout = active_rollout(conn, "p1")
            assert rollout is not None
            seen = gate.live("p1").version
            assert seen == rollout.canary_version
            update_id = gate.submit(prompt_spec(f"candidate {round_no}"), "apply")
            runs_done(gate, update_id)
            decision = db.transaction(
                gate.engine,
                lambda conn, r=rollout: request_canary_decision(
                    conn, "p1", r.id, r.canary_version, r.stable_version, RolloutStatus.ROLLED_BACK, None, "inferior"
                ),
            )
            with gate.engine.connect() as conn:
                before = newest_rollback_request(conn)
            starts = delays(round_no, rng)
            for role, pipe in pipes.items():
                pipe.send({"seen": seen, "to": rollout.stable_version, "delay": starts[role]})
            said = {role: pipe.recv() for role, pipe in pipes.items()}
            assert not any(s.startswith("error") for s in said.values()), said
            db.transaction(gate.engine, reconcile_batch)  # an apply that lost its lock window ends now

            live = gate.live("p1")
            with gate.engine.connect() as conn:  # the rows gate.history is made of, without its per-version summaries
                versions = [v["version"] for v in prompt_history(conn, "p1")]
            assert live.version == seen + 1, f"round {round_no}: version {live.version} after {seen}: {said}"
            assert versions == list(range(seen + 1, 0, -1)), "history lost or duplicated"
            with gate.engine.connect() as conn:
                newest = newest_rollback_request(conn)
                person = get_live_request(conn, newest) if newest > before else None  # refused before it asked
                canary = canary_request(conn, rollout.id)
                held = holds_of(conn, "p1", live.config_hash)
            assert held == [], f"round {round_no}: a held config is live"
            applied = gate.status(update_id).status == UpdateStatus.APPLIED
            outcomes = {
                "apply": applied,
                "rollback": person is not None and person.status == LiveRequestStatus.DONE,
                "canary": canary.id == decision and canary.status == LiveRequestStatus.DONE,
            }
            assert sum(outcomes.values()) == 1, f"round {round_no}: {outcomes} {said}"
            winner = next(k for k, v in outcomes.items() if v)
            wins[winner] += 1
            losers = [r for r in (person, canary) if r is not None and r.status != LiveRequestStatus.DONE]
            assert all(r.status == LiveRequestStatus.REFUSED and r.refusal for r in losers), losers
            assert winner == "rollback" or said["rollback"].startswith("refused: prompt p1: the live version is ")
            assert applied or gate.status(update_id).status in (UpdateStatus.CANCELLED, UpdateStatus.FAILED)
            assert gate.rollout_of_update(rollout.update_id)["status"] != RolloutStatus.CANARY
            (top,) = gate.history("p1", limit=1)
            assert top["kind"] == ("apply" if winner == "apply" else "rollback")
    finally:
        for pipe in pipes.values():
            pipe.send(None)
        for proc in procs:
            proc.join(10)
        worker.shutdown()
    elapsed = time.monotonic() - started
    assert elapsed < 20, f"{ROUNDS} rounds took {elapsed:.1f} s"
    assert sum(wins.values()) == ROUNDS and all(wins.values()), wins  # each of the three won a round
    assert [h["version"] for h in gate.history("p1", limit=1000)] == versions  # the API's history, read once


def newest_rollback_request(conn) -> int:
    """The id of the newest person's rollback request (0: none yet)."""
    newest = conn.execute(select(func.max(live_request.c.id)).where(live_request.c.kind == "rollback")).scalar()
    return int(newest or 0)
