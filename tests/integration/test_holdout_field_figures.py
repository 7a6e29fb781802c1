"""A holdout's per-field figures reach admin only (issue 48, findings 3 and 4), end to end:
`promptgate serve` on MariaDB, a real worker process, the local model server.

The review: a submit token's check of a fields decision, its label field guessed as several
values, returned ``metrics.fields.confusion`` for the holdout's run — which of the guesses the
holdout's rows expect, and how many rows expect each — and a tool call's argument counts
(``metrics.fields.fields[].compared``) told how many holdout rows expect each argument. Now a
reader who may not read the holdout gets, of a fields decision's figures on it, the
holdout's size and each bar's pass or fail; admin gets them all."""

from __future__ import annotations

import re

from support.workers_harness import WorkerFleet, worker_env
from test_holdout_columns import fields_prompt, register_field_holdout

from gate.client.remote import RemoteGate
from gate.domain import Gate
from gate.report.markdown import render_report_markdown
from gate.report.text import render_text

GUESSES = ["SECRETCAT-0", "SECRETCAT-1", "SECRETCAT-2", "other"]


def test_a_holdouts_confusion_matrix_and_field_counts_reach_admin_only(service, model, tmp_path):
    register_field_holdout(service, tmp_path, repo=True)
    gate = Gate.connect(service.db_url)
    gate.map_dataset("extract2", "fholdout", "0", bars={"min_field_accuracy": {"zq_secret_category": "0.5"}})
    fleet = WorkerFleet(worker_env(service.db_url, model.base_url), tmp_path)
    try:
        fields = {"zq_secret_category": {"type": "label", "labels": GUESSES}, "zq_secret_order": "text"}
        with service.client("submit") as ci:
            posted = ci.post(
                "/v1/updates", json={"prompt": fields_prompt("extract2", fields), "mode": "check", "full": True}
            )
            assert posted.status_code == 202, posted.text
        uid = posted.json()["id"]
        fleet.start(1)
        ended = gate.wait(uid, timeout=120, poll=0.1)
        assert ended.update.status in ("PASSED", "REJECTED", "FAILED"), fleet.logs()[-2000:]
    finally:
        fleet.stop_all()
        gate.close()
    with service.client("admin") as admin:
        told = admin.get(f"/v1/updates/{uid}").json()
    runs = {r["dataset"]: r for r in told["runs"]}
    figure = re.compile(r"fholdout min_field_accuracy\[zq_secret_category\] [0-9.]+%")
    assert figure.search(told["reason"] or ""), told["reason"]  # the bar failed: admin sees by how much
    hold = runs["fholdout"]
    assert "SECRETCAT-1" in render_report_markdown(RemoteGate(service.url, service.tokens["admin"]).status(uid, 100))
    assert "SECRETCAT-1" in str(hold["metrics"]["fields"]["confusion"])  # admin: all of it
    assert hold["fields"]["confusion"] and hold["fields"]["fields"][0]["of"] > 0
    size = hold["metrics"]["fields"]["items"]
    for scope in ("read", "submit"):
        with service.client(scope) as reader:
            answers = [
                reader.get(f"/v1/updates/{uid}", params={"failures": 100}),
                reader.get(f"/v1/updates/{uid}", params={"failures": 100, "view": "wire"}),
                reader.get(f"/v1/updates/{uid}/wait", params={"failures": 100, "timeout": 1}),
                reader.get(f"/updates/{uid}?samples=100"),
            ]
        assert [a.status_code for a in answers] == [200] * 4, [a.text[:300] for a in answers]
        report = RemoteGate(service.url, service.tokens[scope]).status(uid, 100)
        assert [r.fields is None and r.tool_calls is None for r in report.runs] == [
            r.dataset == "fholdout" for r in report.runs
        ]  # what the PR comment and `status` render from
        assert "SECRETCAT-1" not in render_report_markdown(report) + render_text(report)
        assert not any(figure.search(a.text) for a in answers), scope  # the reason keeps the bar, not its figure
        assert "min_field_accuracy[zq_secret_category] (figure left out)" in answers[0].text
        for answer in answers[:3]:
            hold = {r["dataset"]: r for r in answer.json()["runs"]}["fholdout"]
            shown = [p for k in ("confusion", "compared", "right") for p in _paths(hold, k)]
            assert shown in ([], [".metrics.confusion={}"]), shown  # a label decision's (empty here)
        runs = {r["dataset"]: r for r in answers[0].json()["runs"]}
        hold, repo = runs["fholdout"], runs["frepo"]
        assert "confusion" not in hold["metrics"]["fields"] and "fields" not in hold["metrics"]["fields"]
        assert hold["metrics"]["fields"]["items"] == size  # the holdout's size stays
        assert hold["fields"] is None and "field_flips" not in hold["metrics"]
        field_checks = [c for c in hold["checks"] if c["bar"] == "min_field_accuracy"]
        assert field_checks and all(c["value"] is None and c["state"] in ("pass", "fail") for c in field_checks)
        assert repo["fields"]["confusion"] and repo["fields"]["fields"][0]["of"] > 0  # a dataset it may read


def _has_key(value, key: str) -> bool:
    if isinstance(value, dict):
        return key in value or any(_has_key(v, key) for v in value.values())
    return isinstance(value, list) and any(_has_key(v, key) for v in value)


def _paths(value, key, at=""):
    if isinstance(value, dict):
        return [f"{at}.{k}={value[k]!r}"[:200] for k in value if k == key] + [
            p for k, v in value.items() for p in _paths(v, key, f"{at}.{k}")
        ]
    return [p for i, v in enumerate(value) for p in _paths(v, key, f"{at}[{i}]")] if isinstance(value, list) else []
