"""A judge's agreement figures on a holdout reach admin only (issue 48's leftover): a judge
live below its floors, evaluated on human-labelled rows the operator registered (not a
repository's), named to a submit token by `sync --dry-run` (``POST /v1/sync``) and by the
refusal of a submission it judges. Youden's J, sensitivity, specificity and κ are per-label
aggregates of those rows; a submit token with absurd floors could read them one dry run at
a time. Now it is told "below the floor" and which floor; admin the figures.
`promptgate serve` on MariaDB, the local model server."""

from __future__ import annotations

import re

from support import judged_env
from support.judging import reply_spec, write_tickets
from test_judge_floors import LENIENT, SAID_J, judge_spec, live_before_the_floors

from gate.domain import Gate

llm = judged_env.llm  # a shared fixture
FIGURE = re.compile(r"(Youden's J|sensitivity|specificity|Cohen's κ) [0-9.]+|[0-9]+ human items")
CONFIG = (
    "datasets:\n  reply-labels: {source: 'https://labels.invalid/labels.csv'}\n"
    "prompts:\n  reply-judge:\n    - {dataset: reply-labels, min_accuracy: 0.5}\n"
)


def test_a_judges_figures_on_a_holdout_are_admins(service, llm, tmp_path, monkeypatch):
    gate = Gate.connect(service.db_url)
    try:
        live_before_the_floors(gate, tmp_path, monkeypatch, judge_spec(rules=LENIENT))  # reply-labels: a holdout
        gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 30)), declared_in="gate.yaml")
        gate.map_dataset("reply", "tickets", "0.5")
    finally:
        gate.close()
    prompt = reply_spec().to_config()
    said = {}
    for scope in ("submit", "admin"):
        with service.client(scope) as client:
            refused = client.post("/v1/updates", json={"prompt": prompt, "mode": "check"})
            dry = client.post("/v1/sync", json={"config": CONFIG, "path": "gate.yaml", "dry_run": True})
        assert refused.status_code == 400 and dry.status_code == 200, (refused.text, dry.text)
        warned = [c for c in dry.json()["changes"] if c["kind"] == "judge-below-floors"]
        assert len(warned) == 1, dry.text
        said[scope] = (refused.json()["error"], str(warned[0]))
    assert SAID_J in said["admin"][0] and SAID_J in said["admin"][1], said["admin"]
    for text in said["submit"]:
        assert not FIGURE.search(text), text
        assert "below the floor Youden's J ≥ 0.5 (its figures left out" in text, text
    assert said["submit"][0].startswith("judge reply-judge v1 cannot tell well enough to decide reply × tickets")
