"""A holdout's per-check figures reach admin only (review of issues 49/50), end to end:
`promptgate serve` on MariaDB, a real worker process, the local model server.

The review: a checks decision's per-check counts (``metrics.checks``, the report's "check by
check" table, a ``min_check_rate`` bar's figure and its "N of M items failed it") were kept for
a holdout's run, so a submit token's one free submission of 32 checks (a regex each on an answer
that repeats the item, or ``equals: {column: ...}`` against guesses) got 32 counts over the
holdout's rows where issue 48 allows its size and each bar's pass or fail."""

from __future__ import annotations

import json

from support.workers_harness import WorkerFleet, worker_env

from gate.client.remote import RemoteGate
from gate.domain import Gate
from gate.report.markdown import render_report_markdown

CHECKS = {
    "zq_long_enough": {"max_chars": 1000000},
    "zq_guess_note": {"contains": {"column": "zq_secret_note"}},
    "zq_guess_refund": {"icontains": "refund"},
}


def _checks_prompt(name: str) -> dict:
    return {
        "name": name,
        "model": "mock-1",
        "messages": [{"role": "user", "content": "{{ item.text }}"}],
        "decision": {"type": "checks", "checks": CHECKS},
    }


def test_a_holdouts_per_check_figures_reach_admin_only(service, model, tmp_path):
    with (tmp_path / "choldout.jsonl").open("w") as fh:  # rows without labels: a checks decision reads none
        for i in range(8):
            fh.write(json.dumps({"item_id": f"ch-{i}", "text": f"order {i} refund", "zq_secret_note": f"n{i}"}) + "\n")
    gate = Gate.connect(service.db_url)
    gate.register_dataset("choldout", str(tmp_path / "choldout.jsonl"))  # from the server's path: a holdout
    gate.map_dataset("extract", "choldout", "0", bars={"min_check_rate": {"zq_guess_refund": "0.5"}})
    fleet = WorkerFleet(worker_env(service.db_url, model.base_url), tmp_path)
    try:
        with service.client("submit") as ci:
            posted = ci.post("/v1/updates", json={"prompt": _checks_prompt("extract"), "mode": "check", "full": True})
            assert posted.status_code == 202, posted.text
        uid = posted.json()["id"]
        fleet.start(1)
        ended = gate.wait(uid, timeout=120, poll=0.1)
        assert ended.update.status in ("PASSED", "REJECTED"), fleet.logs()[-2000:]
    finally:
        fleet.stop_all()
        gate.close()
    with service.client("admin") as admin:
        hold = admin.get(f"/v1/updates/{uid}").json()["runs"][0]
    assert [c["check"] for c in hold["metrics"]["checks"]["checks"]] == sorted(CHECKS)  # admin: all of it
    size = hold["metrics"]["checks"]["items"]
    for scope in ("read", "submit"):
        with service.client(scope) as reader:
            answers = [
                reader.get(f"/v1/updates/{uid}", params={"failures": 100}),
                reader.get(f"/v1/updates/{uid}", params={"failures": 100, "view": "wire"}),
                reader.get(f"/updates/{uid}?samples=100"),
            ]
        assert [a.status_code for a in answers] == [200] * 3, [a.text[:300] for a in answers]
        run = answers[0].json()["runs"][0]
        assert "checks" not in run["metrics"] and run.get("check_rates") is None, run["metrics"].get("checks")
        assert run["metrics"]["scored"] == size  # the holdout's size stays
        rate = [c for c in run["checks"] if c["bar"] == "min_check_rate"]
        assert rate and all(c["value"] is None and c["state"] in ("pass", "fail") for c in rate), rate
        assert all("items failed it" not in (c.get("note") or "") for c in rate), rate
        assert "items failed it" not in answers[2].text, scope  # the page's bar table
        shown = render_report_markdown(RemoteGate(service.url, service.tokens[scope]).status(uid, 100))
        assert "Check by check" not in shown, shown
