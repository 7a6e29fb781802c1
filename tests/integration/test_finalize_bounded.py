"""A run whose finalize keeps raising ends, bounded (issue 48's leftover): it was retried for
ever with backoff, its update open for good (and every run batched after it stalled). Now,
after ``PROMPTGATE_FINALIZE_ATTEMPTS`` failures in a row (3 here; 5 by default) it ends
ERROR with a reason giving the error id the worker logged the traceback under, and its
apply ends FAILED, never APPLIED. The same for an update whose reconcile keeps raising (the
hostile pass: the same loop, one worker step on). Real worker processes on MariaDB, the
local model server, the report read through `promptgate serve`."""

from __future__ import annotations

import re
import time

import sqlalchemy as sa
from support.helpers import rules_spec, write_rule_rows
from support.workers_harness import WorkerFleet, worker_env

from gate.domain import Gate

CORRUPT = (
    "UPDATE prompt_run SET pinned = JSON_SET(pinned, '$.price', "
    "JSON_OBJECT('input_per_million', 'not a number', 'output_per_million', '1')) WHERE update_id = :uid"
)


def test_a_run_whose_finalize_keeps_failing_ends_error_with_an_error_id(service, model, tmp_path):
    gate = Gate.connect(service.db_url)
    engine = sa.create_engine(service.db_url)
    try:
        uid = _applied_through_service(gate, service, tmp_path)
        callers = WorkerFleet(worker_env(service.db_url, model.base_url), tmp_path, ("--role", "materialize,execute"))
        callers.start(1)
        try:
            _wait_until_called(engine, uid)
        finally:
            callers.stop_all()
        with engine.begin() as conn:  # a stored row finalize cannot read
            assert conn.execute(sa.text(CORRUPT), {"uid": uid}).rowcount == 1
        env = worker_env(service.db_url, model.base_url, finalize_attempts=3)
        ended, logs = _ended_by(gate, uid, WorkerFleet(env, tmp_path, ("--role", "finalize,reconcile")))
    finally:
        engine.dispose()
        gate.close()
    assert ended.update.status == "FAILED", (ended.update.status, ended.update.reason, logs[-2000:])
    (run,) = ended.runs
    found = re.search(
        r"could not be finalized: an unexpected error 3 times in a row \(error id ([0-9a-f]{12})\)", run.reason
    )
    assert run.status == "ERROR" and found, run.reason
    assert f"error id {found.group(1)}" in logs and "InvalidOperation" in logs  # the operator's trace
    with service.client("read") as reader:
        told = reader.get(f"/v1/updates/{uid}").json()
    assert told["status"] == "FAILED" and found.group(1) in told["reason"], told["reason"]


BASELINE_GONE = (
    "UPDATE prompt_run SET pinned = JSON_SET(pinned, '$.baseline', JSON_OBJECT('run_id', 999999999)) "
    "WHERE update_id = :uid"
)


def test_an_update_whose_reconcile_keeps_failing_ends_failed_with_an_error_id(service, model, tmp_path):
    gate = Gate.connect(service.db_url)
    engine = sa.create_engine(service.db_url)
    try:
        uid = _applied_through_service(gate, service, tmp_path)
        env = worker_env(service.db_url, model.base_url, finalize_attempts=3)
        scorers = WorkerFleet(env, tmp_path, ("--role", "materialize,execute,finalize"))
        scorers.start(1)
        try:
            _wait_until(engine, uid, "SELECT status FROM prompt_run WHERE update_id = :uid", "DONE")
        finally:
            scorers.stop_all()
        with engine.begin() as conn:  # the run's baseline names a run that is not there
            assert conn.execute(sa.text(BASELINE_GONE), {"uid": uid}).rowcount == 1
        ended, logs = _ended_by(gate, uid, WorkerFleet(env, tmp_path, ("--role", "reconcile")))
    finally:
        engine.dispose()
        gate.close()
    said = r"update [0-9]+ could not be reconciled: an unexpected error 3 times in a row \(error id ([0-9a-f]{12})\)"
    found = re.search(said, ended.update.reason or "")
    assert ended.update.status == "FAILED" and found, (ended.update.status, ended.update.reason, logs[-2000:])
    assert f"error id {found.group(1)}" in logs and "unknown run 999999999" in logs
    with service.client("read") as reader:
        told = reader.get(f"/v1/updates/{uid}").json()
    assert told["status"] == "FAILED" and found.group(1) in told["reason"], told["reason"]


def _applied_through_service(gate, service, tmp_path) -> int:
    """A 4-item apply of ``p1`` submitted through the service: its update id."""
    gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 4)), declared_in="gate.yaml")
    gate.map_dataset("p1", "d1", "0.5")
    with service.client("admin") as admin:
        posted = admin.post("/v1/updates", json={"prompt": rules_spec("p1").to_config(), "mode": "apply"})
    assert posted.status_code == 202, posted.text
    return posted.json()["id"]


def _ended_by(gate, uid: int, fleet: WorkerFleet):
    """The update's report once one process of ``fleet`` has ended it, and the fleet's logs."""
    fleet.start(1)
    try:
        ended = gate.wait(uid, timeout=20, poll=0.2)
    finally:
        fleet.stop_all()
    return ended, fleet.logs()


def _wait_until(engine, uid: int, query: str, wanted, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with engine.connect() as conn:
            if conn.execute(sa.text(query), {"uid": uid}).scalar() == wanted:
                return
        time.sleep(0.1)
    raise AssertionError(f"update {uid}: {query} did not give {wanted!r} within {timeout} s")


def _wait_until_called(engine, uid: int, timeout: float = 30.0) -> None:
    """Every item of the update's run answered (none PENDING), the run still RUNNING."""
    pending = sa.text(
        "SELECT r.materialized_at IS NOT NULL, (SELECT COUNT(*) FROM prompt_run_item i WHERE i.run_id = r.id "
        "AND i.verdict = 'PENDING') FROM prompt_run r WHERE r.update_id = :uid"
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with engine.connect() as conn:
            materialized, left = conn.execute(pending, {"uid": uid}).one()
        if materialized and left == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"update {uid}'s items were not all called within {timeout} s")
