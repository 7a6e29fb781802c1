"""A holdout's per-field figure stays out of every list that shows an update's reason
(issue 48's leftover, after the report was closed): `GET /v1/updates` (the list, a
commit's updates), the updates page and a prompt's page. The update's stored reason says
"fholdout min_field_accuracy[…] 25.0% < …": a reader who may not read the holdout gets
the bar and that it failed ("(figure left out)"), admin the figure. `promptgate serve` on
MariaDB, a real worker process, the local model server."""

from __future__ import annotations

import re

from support.workers_harness import WorkerFleet, worker_env
from test_holdout_columns import fields_prompt, register_field_holdout

from gate.client.remote import RemoteGate
from gate.domain import Gate

GUESSES = ["SECRETCAT-0", "SECRETCAT-1", "SECRETCAT-2", "other"]
SHA = "5e" * 20
FIGURE = re.compile(r"fholdout min_field_accuracy\[zq_secret_category\] [0-9.]+%")
LEFT_OUT = "fholdout min_field_accuracy[zq_secret_category] (figure left out)"


def test_a_holdouts_field_figure_is_left_out_of_every_list_of_updates(service, model, tmp_path):
    register_field_holdout(service, tmp_path, repo=True)
    gate = Gate.connect(service.db_url)
    gate.map_dataset("extract2", "fholdout", "0", bars={"min_field_accuracy": {"zq_secret_category": "0.9"}})
    fleet = WorkerFleet(worker_env(service.db_url, model.base_url), tmp_path)
    try:
        fields = {"zq_secret_category": {"type": "label", "labels": GUESSES}, "zq_secret_order": "text"}
        prompt = fields_prompt("extract2", fields)
        with service.client("submit") as ci:
            posted = ci.post("/v1/updates", json={"prompt": prompt, "mode": "check", "full": True, "sha": SHA})
            assert posted.status_code == 202, posted.text
        uid = posted.json()["id"]
        fleet.start(1)
        ended = gate.wait(uid, timeout=120, poll=0.1)
        assert FIGURE.search(ended.update.reason or ""), (ended.update.reason, fleet.logs()[-2000:])
    finally:
        fleet.stop_all()
        gate.close()
    lists = ["/v1/updates", f"/v1/updates?sha={SHA}", "/v1/updates?prompt=extract2", "/", "/prompts/extract2"]
    with service.client("admin") as admin:
        assert all(FIGURE.search(admin.get(path).text) for path in lists)  # admin: the figure
    for scope in ("read", "submit"):
        with service.client(scope) as reader:
            answers = {path: reader.get(path) for path in lists}
        assert {p: a.status_code for p, a in answers.items()} == dict.fromkeys(lists, 200)
        told = {p: a.text for p, a in answers.items() if FIGURE.search(a.text)}
        assert not told, (scope, {p: FIGURE.search(t).group(0) for p, t in told.items()})
        assert all(LEFT_OUT in a.text for a in answers.values()), scope
        remote = RemoteGate(service.url, service.tokens[scope])  # what `status --sha` and the Action read
        shown = [u.reason for u in remote.updates_for_sha(SHA)] + [u.reason for u in remote.list_updates(5)]
        assert all(LEFT_OUT in (r or "") and not FIGURE.search(r or "") for r in shown), shown
