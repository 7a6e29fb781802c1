"""Canary rollouts end to end on MariaDB: real worker processes (the rollout worker among
them), runtime processes on the database and through the service sending production's
feedback, the release pipeline's `wait --sha --until promoted`. An apply with a gate
config `rollout:` serves ~10 % of calls to the canary by the caller's key (the same key
always the same version); feedback drives it PROMOTED, or ROLLED_BACK (the stable
version's config live again); without enough feedback it ends UNDECIDED at its time limit;
an apply or a rollback during a canary ends it first; a rollout worker killed mid-decision
loses nothing; without `rollout:` nothing changes."""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import select, text
from support.canary import SHA, STABLE_RULES, TRAFFIC, WORSE_RULES, gate_config, prompt_spec, wait_applied, wait_until
from support.cli import run_cli
from support.runtime_process import RuntimeFleet
from support.workers_harness import WorkerFleet, worker_env

from gate import gateconfig
from gate.mockllm import MockLLMServer
from gate.rollout.routing import key_share
from gate.runtime import PromptRuntime
from gate.states import RolloutStatus
from gate.store.feedback import count_feedback, read_raw_tally, read_tally
from gate.store.schema import prompt
from workers.rollout import look
from workers.supervisor import run_until_terminal

ROLLOUT = {"canary_percent": 10, "min_feedback": 100, "max_drop": 0.2, "confidence": 0.95, "max_hours": 1}


@pytest.fixture
def llm(monkeypatch):
    with MockLLMServer(latency_ms=1) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield server


@pytest.fixture
def procs(tmp_path, llm):
    made = {}

    def workers(gate, **settings):
        fleet = WorkerFleet(
            worker_env(gate.settings.database_url, llm.base_url, rollout_interval=0.3, **settings), tmp_path
        )
        made.setdefault("workers", []).append(fleet)
        return fleet

    def runtimes():
        fleet = RuntimeFleet(tmp_path, {"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test-key"})
        made.setdefault("runtimes", []).append(fleet)
        return fleet

    yield workers, runtimes
    for fleet in made.get("runtimes", []):
        fleet.kill_all()
    for fleet in made.get("workers", []):
        fleet.stop_all()


def stable_then_canary(gate, tmp_path, workers, canary_rules: str, rollout: dict) -> tuple[int, int]:
    """v1 live at 100 % (the first version has nothing to be compared with), then an apply
    of v2 with the gate config's rollout: (v1's update, v2's update)."""
    gateconfig.sync(gate, gate_config(tmp_path, rollout))
    workers(gate).start(1)
    first = gate.submit(prompt_spec("stable"), "apply", {"sha": SHA[1]})
    wait_applied(gate, first)
    assert gate.rollout_of_update(first) is None
    second = gate.submit(prompt_spec("canary", canary_rules), "apply", {"sha": SHA[2]})
    wait_applied(gate, second)  # offline it clears every bar, whatever it does in production
    return first, second


def production(runtimes, gate, service, n_db: int = 2, n_service: int = 2, **config):
    """Runtime processes on the database and through the service (a runtime token for p1,
    which sends the feedback too: its call ids verify), calling p1 on production's traffic
    with 1,000 users' keys."""
    fleet = runtimes()
    common = {"prompt": "p1", "ttl": 1.0, "items": TRAFFIC, "keys": 1000, "rate": 100, **config}
    for _ in range(n_db):
        fleet.start(db_url=gate.settings.database_url, **common)
    for _ in range(n_service):
        fleet.start(gate_url=service.url, token=service.tokens["runtime"], **common)
    return fleet


def decided(gate, update_id: int, timeout: float = 90) -> dict:
    return wait_until(
        lambda: (r := gate.rollout_of_update(update_id)) and r["status"] != RolloutStatus.CANARY and r,
        timeout,
        "the rollout worker's decision",
    )


def canary_share(stats: list[dict], rollout_id: int) -> float:
    canary = sum(s["by_arm"].get(f"{rollout_id}:canary", 0) for s in stats)
    stable = sum(s["by_arm"].get(f"{rollout_id}:stable", 0) for s in stats)
    return canary / (canary + stable)


def test_a_canary_serves_ten_percent_by_key_and_feedback_promotes_it(mysql_gate, service, tmp_path, procs):
    gate, (workers, runtimes) = mysql_gate, procs
    _, second = stable_then_canary(gate, tmp_path, workers, STABLE_RULES, ROLLOUT)
    fleet = production(runtimes, gate, service)
    with ThreadPoolExecutor(1) as pool:  # the release pipeline's wait, beside production
        waiting = pool.submit(
            run_cli, "--gate-url", service.url, "wait", "--sha", SHA[2], "--until", "promoted", "--timeout", "150",
            env={"PROMPTGATE_TOKEN": service.tokens["read"]}, timeout=200,
        )  # fmt: skip
        decided(gate, second, timeout=150)
        stats = fleet.stop_all()  # production stops once decided, not a wait's poll (2 s) later: ~400 calls fewer
        waiter = waiting.result()
    assert waiter.returncode == 0, waiter.stdout + waiter.stderr
    assert "rollout PROMOTED" in waiter.stderr
    rollout = gate.rollout_of_update(second)
    assert rollout["status"] == RolloutStatus.PROMOTED and "non-inferior, promoted" in rollout["reason"]
    figures = rollout["figures"]
    assert figures["canary"]["n"] >= 100 and figures["stable"]["n"] >= 100 and figures["interval"][0] > -0.2
    assert all(s["done"] and s["errors"] == 0 and s["sticky_violations"] == 0 for s in stats), stats
    assert all(s["feedback"]["dropped"] == 0 and s["feedback"]["refused"] == 0 for s in stats), stats
    share = canary_share(stats, rollout["id"])
    assert 0.06 < share < 0.14, share
    arms = [s["arms"][str(rollout["id"])] for s in stats]  # every process: a key's arm is its hash's
    assert all(
        arm == ("canary" if key_share(key, rollout["id"]) < 10 else "stable") for a in arms for key, arm in a.items()
    )
    assert sum(len(a) for a in arms) > 400
    assert not any(s["sqlalchemy_loaded"] for s in stats[2:])  # through the service: no database client at all
    live, history = gate.live("p1"), gate.history("p1")
    assert live.version == 2 and history[0]["rollout"]["status"] == RolloutStatus.PROMOTED
    assert history[0]["rollout"]["figures"]["interval"] == figures["interval"]


def test_feedback_that_shows_the_canary_worse_rolls_it_back(mysql_gate, service, tmp_path, procs):
    gate, (workers, runtimes) = mysql_gate, procs
    first, second = stable_then_canary(gate, tmp_path, workers, WORSE_RULES, ROLLOUT)
    fleet = production(runtimes, gate, service, n_db=0, n_service=3)  # only runtime tokens' calls decide it
    rollout = decided(gate, second)
    assert rollout["status"] == RolloutStatus.ROLLED_BACK, rollout
    assert "inferior, rolled back" in rollout["reason"] and rollout["figures"]["interval"][1] < -0.2
    live = gate.live("p1")
    assert (live.version, live.kind, live.restored_version, live.actor) == (3, "rollback", 1, "rollout worker")
    assert live.config == gate.history("p1")[-1]["config"] and "canary v2 rolled back" in live.reason
    wait_until(lambda: all(p.version == 3 for p in gate.served("p1")["processes"]), 30, "the fleet on v3")
    stats = fleet.stop_all()  # the waits below answer from the rollback alone (after_release.served_state)
    env = {"PROMPTGATE_TOKEN": service.tokens["read"]}
    until = run_cli(
        "--gate-url", service.url, "wait", "--sha", SHA[2], "--until", "promoted", "--timeout", "5", env=env
    )
    assert until.returncode == 1 and "rollout ROLLED_BACK" in until.stderr, until.stderr
    served = run_cli("--gate-url", service.url, "wait", "--sha", SHA[2], "--served", "--timeout", "5", env=env)
    assert served.returncode == 1 and "v2 was rolled back" in served.stderr, served.stderr
    assert all(s["errors"] == 0 and s["feedback"]["dropped"] == 0 for s in stats), stats
    assert all(s["feedback"]["refused"] == 0 for s in stats), stats  # every call id verified
    with gate.engine.connect() as conn:  # every outcome sent was stored and counted once
        tally, stored = read_raw_tally(conn, rollout["id"]), count_feedback(conn, rollout["id"])
    assert stored == tally["canary"][0] + tally["stable"][0] > 0


def test_a_canary_without_enough_feedback_ends_undecided_at_its_time_limit(mysql_gate, service, tmp_path, procs):
    gate, (workers, runtimes) = mysql_gate, procs
    slow = {**ROLLOUT, "min_feedback": 1_000_000, "max_hours": 0.002}  # 7.2 s
    _, second = stable_then_canary(gate, tmp_path, workers, WORSE_RULES, slow)
    fleet = production(runtimes, gate, service, n_db=1, n_service=1, rate=20)
    started = time.monotonic()
    rollout = decided(gate, second, timeout=60)
    assert rollout["status"] == RolloutStatus.UNDECIDED and "undecided after 0.002 h" in rollout["reason"]
    assert time.monotonic() - started < 40
    live = gate.live("p1")
    assert (live.version, live.restored_version, live.config["description"]) == (3, 1, "stable")
    history = run_cli("--gate-url", service.url, "history", "p1", env={"PROMPTGATE_TOKEN": service.tokens["read"]})
    lines = history.stdout.splitlines()
    assert lines[0].startswith("v3 (live)") and "rollback to v1 by rollout worker: canary v2 undecided:" in lines[0]
    assert "canary UNDECIDED: canary " in lines[1] and lines[1].startswith("v2 ")
    fleet.stop_all()


def rollout_locked(gate, rollout_id: int) -> bool:
    """Is the rollout's row locked by another transaction (a decision in progress)?"""
    with gate.engine.connect() as probe:
        free = probe.execute(
            text("SELECT id FROM prompt_rollout WHERE id = :i FOR UPDATE SKIP LOCKED"), {"i": rollout_id}
        ).first()
        probe.rollback()
    return free is None


def test_a_rollout_worker_killed_mid_decision_loses_nothing(mysql_gate, tmp_path, procs, llm):
    gate, (workers, _) = mysql_gate, procs
    gateconfig.sync(gate, gate_config(tmp_path, ROLLOUT))
    run_until_terminal(gate, [gate.submit(prompt_spec("stable"), "apply")])
    second = gate.submit(prompt_spec("canary", WORSE_RULES), "apply")
    run_until_terminal(gate, [second])
    rollout_id = gate.rollout_of_update(second)["id"]
    events = [{"prompt": "p1", "version": 2, "call_id": f"c{i}", "correct": i % 2 == 0} for i in range(400)]
    events += [{"prompt": "p1", "version": 1, "call_id": f"s{i}", "correct": True} for i in range(1000)]
    assert gate.record_feedback(events[:1000])["recorded"] == 1000
    assert gate.record_feedback(events[1000:])["recorded"] == 400
    with gate.engine.connect() as holder:  # the live row held: the decision blocks inside its transaction
        holder.execute(select(prompt.c.version).where(prompt.c.name == "p1").with_for_update())
        fleet = workers(gate)
        (proc,) = fleet.start(1)
        wait_until(lambda: rollout_locked(gate, rollout_id), 60, "the rollout worker inside its decision")
        fleet.kill(proc, signal.SIGKILL)
        holder.rollback()
    found = gate.rollout_of_update(second)
    assert found["status"] == RolloutStatus.CANARY and found["decided_at"] is None
    assert gate.live("p1").version == 2 and len(gate.history("p1")) == 2
    with gate.engine.connect() as conn:
        assert count_feedback(conn, rollout_id) == 1400 and read_tally(conn, rollout_id) == {
            "canary": (400, 200),
            "stable": (1000, 1000),
        }
    workers(gate).start(1)
    assert decided(gate, second)["status"] == RolloutStatus.ROLLED_BACK
    assert [h["kind"] for h in gate.history("p1")] == ["rollback", "apply", "apply"]


def test_an_apply_or_a_rollback_during_a_canary_ends_it_first(mysql_gate, tmp_path, llm):
    gate = mysql_gate
    gateconfig.sync(gate, gate_config(tmp_path, ROLLOUT))
    run_until_terminal(gate, [gate.submit(prompt_spec("v1"), "apply")])
    second = gate.submit(prompt_spec("v2"), "apply")
    run_until_terminal(gate, [second])
    third = gate.submit(prompt_spec("v3"), "apply")
    run_until_terminal(gate, [third])
    superseded, current = gate.rollout_of_update(second), gate.rollout_of_update(third)
    assert superseded["status"] == RolloutStatus.SUPERSEDED and "update " + str(third) in superseded["reason"]
    assert (current["status"], current["canary_version"], current["stable_version"]) == ("CANARY", 3, 1)
    done = gate.rollback("p1", reason="v3 answers slowly", actor="alice", to_version=1)
    assert done["rollout_ended"] == current["id"]
    ended = gate.rollout_of_update(third)
    assert ended["status"] == RolloutStatus.SUPERSEDED and "rolled back to version 1 by alice" in ended["reason"]
    assert look(gate.engine, current["id"]) is None  # nothing left for the rollout worker


def test_without_a_rollout_nothing_changes(mysql_gate, tmp_path, llm):
    gate = mysql_gate
    gateconfig.sync(gate, gate_config(tmp_path))
    ids = [gate.submit(prompt_spec("v1"), "apply")]
    run_until_terminal(gate, ids)
    ids.append(gate.submit(prompt_spec("v2"), "apply"))
    run_until_terminal(gate, ids[1:])
    assert gate.rollout_of_update(ids[1]) is None and gate.rollouts("p1") == []
    runtime = PromptRuntime(gate=gate, ttl=30)
    results = [runtime.decide("p1", {"text": "alpha"}, key=f"u{i}") for i in range(30)]
    assert {(r.version, r.rollout_id, r.arm) for r in results} == {(2, None, None)}
    assert runtime.feedback(results[0], correct=True) is False
    runtime.close()
