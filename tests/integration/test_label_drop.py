"""A pull request's token cannot stop a prompt's labels being read (review of issues 49/50),
end to end: `promptgate serve` on MariaDB, a real worker process, the local model server.

The review: a classifier whose live version is decided by its rows' labels, resubmitted by a
submit token as ``decision: {type: checks, checks: {any: {max_chars: 1000000}}}``, ended
PASSED "every bar cleared (d 100.0% ≥ 90% the share of items passing every check)": no answer
was compared with a label, and the push job's apply then made it live. Now the submit token
is refused (403, naming both kinds); an admin may still make such a change."""

from __future__ import annotations

from support.helpers import RULES, write_rule_rows
from support.workers_harness import WorkerFleet, worker_env

from gate.domain import Gate

LABELLED = {
    "name": "classify",
    "model": "mock-1",
    "messages": [{"role": "system", "content": RULES}, {"role": "user", "content": "{{ item.text }}"}],
}
TRIVIAL = {
    "name": "classify",
    "model": "mock-1",
    "messages": [{"role": "user", "content": "{{ item.text }}"}],
    "decision": {"type": "checks", "checks": {"any": {"max_chars": 1000000}}},
}


def test_a_submit_token_cannot_turn_a_labelled_prompt_into_one_that_reads_no_label(service, model, tmp_path):
    gate = Gate.connect(service.db_url)
    gate.register_dataset("labelled", str(write_rule_rows(tmp_path / "rows.csv", 12)), declared_in="gate.yaml")
    gate.map_dataset("classify", "labelled", "0.9")
    fleet = WorkerFleet(worker_env(service.db_url, model.base_url), tmp_path)
    try:
        with service.client("admin") as admin:
            applied = admin.post("/v1/updates", json={"prompt": LABELLED, "mode": "apply"})
            assert applied.status_code == 202, applied.text
        fleet.start(1)
        assert gate.wait(applied.json()["id"], timeout=120, poll=0.1).update.status == "APPLIED", fleet.logs()[-2000:]
        with service.client("submit") as ci:
            refused = ci.post("/v1/updates", json={"prompt": TRIVIAL, "mode": "check"})
        assert refused.status_code == 403, refused.text
        assert "decided by its rows' labels (label)" in refused.json()["error"]
        assert "(checks) reads none" in refused.json()["error"]
        with service.client("submit") as ci:  # the same prompt still decided by its labels: admitted
            kept = ci.post("/v1/updates", json={"prompt": {**LABELLED, "description": "reworded"}, "mode": "check"})
        assert kept.status_code == 202, kept.text
        with service.client("admin") as admin:  # an admin's change of what decides it
            assert admin.post("/v1/updates", json={"prompt": TRIVIAL, "mode": "check"}).status_code == 202
    finally:
        fleet.stop_all()
        gate.close()
