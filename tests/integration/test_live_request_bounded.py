"""A canary decision whose carrying out raises an unexpected error no longer stops every
update (the hostile pass, beside issue 48's finalize bound): the reconcile step carries out
the PENDING live requests before the updates of each poll, and a request that raised
something other than a refusal (here: its stored decision one no rollout takes) was
raised out of the poll each time, so no update was reconciled again while it waited — for
ever, a canary's decision never expiring. Now such a request is passed over (the updates
go on) and after ``PROMPTGATE_FINALIZE_ATTEMPTS`` failures (3 here) ends REFUSED, its
refusal naming the error id the worker logged. MariaDB, real worker processes."""

from __future__ import annotations

import re
import time

import pytest
import sqlalchemy as sa
from support.canary import WORSE_RULES, gate_config, prompt_spec
from support.workers_harness import WorkerFleet, worker_env

from gate import gateconfig
from gate.mockllm import MockLLMServer
from gate.states import RolloutStatus
from workers.rollout import look
from workers.supervisor import run_until_terminal

CORRUPT = "UPDATE live_request SET decision = 'BOGUS' WHERE rollout_id = :rid AND status = 'PENDING'"
REFUSAL = "SELECT status, refusal FROM live_request WHERE rollout_id = :rid"


@pytest.fixture
def llm(monkeypatch):
    with MockLLMServer(latency_ms=0) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield server


def test_a_live_request_that_keeps_raising_holds_no_update_back(mysql_gate, tmp_path, llm):
    gate = mysql_gate
    rollout = {"min_feedback": 100, "max_hours": 0.0001, "hold_undecided": True}
    gateconfig.sync(gate, gate_config(tmp_path, rollout))
    run_until_terminal(gate, [gate.submit(prompt_spec("stable"), "apply")])
    second = gate.submit(prompt_spec("canary", WORSE_RULES), "apply")
    run_until_terminal(gate, [second])
    rollout_id = gate.rollout_of_update(second)["id"]
    time.sleep(0.5)
    assert look(gate.engine, rollout_id) == RolloutStatus.UNDECIDED  # its request waits for reconcile
    with gate.engine.begin() as conn:  # a decision no rollout ever takes
        assert conn.execute(sa.text(CORRUPT), {"rid": rollout_id}).rowcount == 1
    later = gate.submit(prompt_spec("a check meanwhile"), "check")
    fleet = WorkerFleet(worker_env(gate.settings.database_url, llm.base_url, finalize_attempts=3), tmp_path)
    fleet.start(1)
    try:
        ended = gate.wait(later, timeout=20, poll=0.2)
        assert ended.update.status in ("PASSED", "REJECTED"), (ended.update.status, fleet.logs()[-2000:])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with gate.engine.connect() as conn:
                status, refusal = conn.execute(sa.text(REFUSAL), {"rid": rollout_id}).one()
            if status != "PENDING":
                break
            time.sleep(0.2)
        logs = fleet.logs()
    finally:
        fleet.stop_all()
    found = re.search(
        r"could not be carried out: an unexpected error 3 times in a row \(error id ([0-9a-f]{12})\)", refusal or ""
    )
    assert status == "REFUSED" and found, (status, refusal, logs[-2000:])
    assert f"error id {found.group(1)}" in logs
    assert gate.live("p1").version == 2  # nothing was rolled back: the canary stays as it was
