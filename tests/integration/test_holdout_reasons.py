"""A holdout's rows, ids and labels reach no reader but admin through an update's reasons,
its slices or a dataset's summary (issue 33, findings 1 and 4), end to end: `promptgate
serve` on MariaDB, real worker processes, the local model server.

The hostile review's attacks, by a submit token against a holdout (a dataset the operator
registered from a path of the server's, whose rows only admin may read): a candidate whose
user message is ``{{ {}[item.subject ~ " | " ~ item.text] }}`` made every item's template
error quote its row, and the first one went into the run's reason and the update's — in
``GET /v1/updates/{id}``, ``/wait``, the list, the status page and the PR comment; one
declaring ``labels: [urgent, nope]`` ended with the ids and labels of the rows the prompt
had no label for; ``slice_by`` a free-text column listed every text. Each is read back here
with a read and a submit token from every place the service shows an update, and admin
still sees the detail."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from sqlalchemy import update
from support.workers_harness import WorkerFleet, worker_env

from gate.client.remote import RemoteGate
from gate.domain import Gate
from gate.report.markdown import render_report_markdown
from gate.report.text import render_text
from gate.store.schema import prompt_run, prompt_update

ROWS = 20
SHAS = {"template": "5e" * 20, "labels": "6e" * 20, "slices": "7e" * 20}  # and a source each: none supersedes
SECRETS = ("HOLDSUBJ", "SECRET-HOLDOUT", "hold-0", "hold-1")  # subjects, texts, item ids
RULES = "Classify the message.\n- urgent: down\ndefault: routine"


def write_holdout(path: Path) -> Path:
    """Every text says the store is down (the rules answer urgent); half the rows expect
    routine: 50% accuracy, each text its own slice."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "subject", "text"])
        for i in range(ROWS):
            label = "urgent" if i % 2 else "routine"
            w.writerow([f"hold-{i:02d}", label, f"HOLDSUBJ-{i:02d}", f"Our store is down, SECRET-HOLDOUT-{i:02d}"])
    return path


def candidate(user: str, labels=("urgent", "routine"), rules: str = RULES) -> dict:
    return {
        "name": "triage",
        "model": "mock-1",
        "labels": list(labels),
        "messages": [{"role": "system", "content": rules}, {"role": "user", "content": user}],
    }


ATTACKS = {
    "template": candidate('{{ {}[item.subject ~ " | " ~ item.text] }}'),
    "labels": candidate("{{ item.text }}", labels=("urgent", "nope"), rules="Classify the message.\n- urgent: down"),
    "slices": candidate("{{ item.text }}"),
}


@pytest.fixture
def holdout(service, model, tmp_path):
    """The operator's holdout mapped to prompt triage, sliced by its free-text column; the
    three attacks submitted by a submit token and run to their end by a worker process.
    Yields the gate and {attack: update id}."""
    gate = Gate.connect(service.db_url)
    fleet = WorkerFleet(worker_env(service.db_url, model.base_url), tmp_path)
    try:
        gate.register_dataset("holdout", str(write_holdout(tmp_path / "holdout.csv")))
        bars = {"slice_by": "text", "min_slice_accuracy": "0.9", "min_slice_items": 1}
        gate.map_dataset("triage", "holdout", "0.4", bars=bars)
        ids = {}
        with service.client("submit") as ci:
            for name, prompt in ATTACKS.items():
                body = {"prompt": prompt, "mode": "check", "full": True, "sha": SHAS[name], "source_key": name}
                posted = ci.post("/v1/updates", json=body)
                assert posted.status_code == 202, posted.text
                ids[name] = posted.json()["id"]
        fleet.start(1)
        ended = {name: gate.wait(uid, timeout=120, poll=0.1) for name, uid in ids.items()}
        assert {name: r.status for name, r in ended.items()} == {
            "template": "FAILED",
            "labels": "FAILED",
            "slices": "REJECTED",
        }, (fleet.logs()[-3000:], {name: r.update.reason for name, r in ended.items()})
        yield gate, ids
    finally:
        fleet.stop_all()
        gate.close()


def everything_shown(service, scope: str, update_id: int) -> tuple[str, str]:
    """All a token of ``scope`` reads of an update: its own (its report in each form, the
    wait, its page, and the PR comment and `status` text made from it), and the lists that
    show it among the others."""
    texts, lists = [], []
    with service.client(scope) as reader:
        for route, params in (
            ("", {"failures": 100}),
            ("", {"failures": 100, "view": "wire"}),
            ("/wait", {"failures": 100, "timeout": 1}),
        ):
            got = reader.get(f"/v1/updates/{update_id}{route}", params=params)
            assert got.status_code == 200, got.text
            texts.append(got.text)
        for params in ({"limit": 50}, {"sha": SHAS["template"]}, {"prompt": "triage", "status": "FAILED"}):
            got = reader.get("/v1/updates", params=params)
            assert got.status_code == 200, got.text
            lists.append(got.text)
        for page in (f"/updates/{update_id}?samples=100", "/", "/prompts/triage", "/?prompt=triage"):
            got = reader.get(page)
            assert got.status_code == 200, (page, got.text[:300])
            (lists if page.startswith("/?") or page in ("/", "/prompts/triage") else texts).append(got.text)
    report = RemoteGate(service.url, service.tokens[scope]).status(update_id, 100)
    return "\n".join(texts + [render_report_markdown(report), render_text(report)]), "\n".join(lists)


def test_no_reader_but_admin_gets_a_holdouts_rows_from_an_update(service, holdout):
    """One holdout, three attacks run once: what a read and a submit token get, what admin
    gets, and a reason stored by an older gate (they hold the rows), in that order."""
    gate, ids = holdout
    for scope in ("read", "submit"):
        readers_get_counts_and_kinds(service, ids, scope)
    admin_sees_which_items_and_what_they_said(service, ids)
    a_reason_an_older_gate_wrote_is_read_without_its_items(service, gate, ids)


def readers_get_counts_and_kinds(service, ids: dict, scope: str) -> None:
    for name, update_id in ids.items():
        shown = "\n".join(everything_shown(service, scope, update_id))
        for secret in SECRETS:
            assert secret not in shown, (name, scope, secret, _around(shown, secret))
    labels, _ = everything_shown(service, scope, ids["labels"])  # the lists show the other candidates
    assert "routine" not in labels, _around(labels, "routine")  # the holdout's label the candidate lacks
    with service.client(scope) as reader:
        template = reader.get(f"/v1/updates/{ids['template']}").json()
        labelled = reader.get(f"/v1/updates/{ids['labels']}").json()
        sliced = reader.get(f"/v1/updates/{ids['slices']}").json()
    # what every reader still gets: counts and kinds, and the slices by rank
    assert template["runs"][0]["reason"] == (
        f"{ROWS} of {ROWS} items of holdout could not be scored (template: {ROWS}; see the failing items)"
    )
    assert template["reason"] == f"could not be scored: holdout: {template['runs'][0]['reason']}"
    assert labelled["runs"][0]["reason"] == (
        "dataset holdout: 10 row(s) with 1 label(s) the prompt does not have (its labels: urgent, nope)"
    )
    assert sliced["reason"].startswith(
        "missed: holdout min_slice_accuracy[text]: a slice at 0.0% < bar 90% (10 slices)"
    )
    assert sliced["reason"].count("a slice at") == 1  # said once for the ten slices that miss alike
    run = sliced["runs"][0]
    assert [s["value"] for s in run["slices"]["slices"]] == [f"slice {n}" for n in range(1, ROWS + 1)]
    assert (run["matches"], run["scored"]) == (10, 20)
    assert all("item_detail" not in (r["metrics"] or {}) for r in template["runs"] + labelled["runs"])


def admin_sees_which_items_and_what_they_said(service, ids: dict) -> None:
    with service.client("admin") as admin:
        template = admin.get(f"/v1/updates/{ids['template']}", params={"failures": 100}).json()["runs"][0]
        labelled = admin.get(f"/v1/updates/{ids['labels']}").json()["runs"][0]
        sliced = admin.get(f"/v1/updates/{ids['slices']}").json()["runs"][0]
        page = admin.get(f"/updates/{ids['labels']}").text
    first = template["metrics"]["item_detail"]["first_error"]
    assert first["item_id"] == "hold-00" and first["error"].startswith("template: template refers to a missing")
    assert "(a key the template computed" in first["error"]  # the value, not even to admin: the rows are theirs
    assert {f["item_id"] for f in template["failures"]} == {f"hold-{i:02d}" for i in range(ROWS)}
    assert labelled["metrics"]["item_detail"]["unknown_labels"] == {"routine": 10}
    assert [e["item_id"] for e in labelled["metrics"]["item_detail"]["examples"]] == ["hold-00", "hold-02", "hold-04"]
    assert "item hold-00: &#39;routine&#39;" in page  # the status page says it to admin
    assert sorted(s["value"] for s in sliced["slices"]["slices"])[0] == "Our store is down, SECRET-HOLDOUT-00"


def a_reason_an_older_gate_wrote_is_read_without_its_items(service, gate, ids: dict) -> None:
    """Reasons stored before this change held the rows: they are read cut where they began
    to name one (``gate.verdict.reasons.without_legacy_items``), for every reader."""
    old_run = (
        "20 of 20 items of holdout could not be scored; the first: item hold-00: template: template refers to a "
        "missing item field: 'dict object' has no attribute 'HOLDSUBJ-00 | Our store is down, SECRET-HOLDOUT-00' "
        "(see the failing items)"
    )
    with gate.engine.begin() as conn:
        conn.execute(
            update(prompt_update)
            .where(prompt_update.c.id == ids["template"])
            .values(reason=f"could not be scored: holdout: {old_run}")
        )
        conn.execute(update(prompt_run).where(prompt_run.c.update_id == ids["template"]).values(reason=old_run))
    with service.client("read") as reader:
        listed = reader.get("/v1/updates", params={"sha": SHAS["template"]}).text
        report = reader.get(f"/v1/updates/{ids['template']}", params={"failures": 3}).json()  # not the cached one
        page = reader.get("/").text
    for secret in SECRETS:
        assert secret not in listed + json.dumps(report) + page, secret
    assert report["runs"][0]["reason"] == "20 of 20 items of holdout could not be scored (see the failing items)"


def _around(text: str, secret: str) -> str:
    at = text.find(secret)
    return text[max(0, at - 200) : at + 100]


def test_a_holdouts_expected_values_reach_no_reader_through_its_versions_nor_a_submit_check(service, tmp_path):
    """A holdout whose rows give expected objects: the summary stored with its version (per
    field, how many rows expect each value, the first that is not a number) went to any
    reader of ``/versions`` and ``/preview``, and the submit check quoted a value to the
    submit token whose prompt could not read it."""
    path = tmp_path / "fholdout.jsonl"
    with path.open("w") as fh:
        for i in range(6):
            expected = {"category": f"SECRETCAT-{i % 3}", "amount": f"SECRETAMT-{i}"}
            fh.write(json.dumps({"item_id": f"f{i}", "text": f"message {i}", "expected": expected}) + "\n")
    gate = Gate.connect(service.db_url)
    try:
        gate.register_dataset("fholdout", str(path))
        gate.map_dataset("extract", "fholdout", "0.5")
    finally:
        gate.close()
    routes = ("/v1/datasets/fholdout/versions", "/v1/datasets/fholdout/versions/0", "/v1/datasets/fholdout/preview")
    for scope in ("read", "submit", "admin"):
        with service.client(scope) as reader:
            shown = "".join(reader.get(route, params={"rows": 0}).text for route in routes)
        assert ("SECRETCAT" in shown and "SECRETAMT" in shown) == (scope == "admin"), scope
        assert ('"kinds":["string"]' in shown) == (scope == "admin")  # a field's kinds name it: admin's
        assert ('"field_count":2' in shown) == (scope != "admin")  # the others: totals (test_holdout_columns)
    for fields in ({"category": {"type": "label", "labels": ["billing", "other"]}}, {"amount": "number"}):
        prompt = {
            "name": "extract",
            "model": "mock-1",
            "messages": [{"role": "user", "content": "{{ item.text }}"}],
            "decision": {"type": "fields", "fields": fields},
        }
        with service.client("submit") as ci, service.client("admin") as admin:
            refused = ci.post("/v1/updates", json={"prompt": prompt, "mode": "check"})
            told = admin.post("/v1/updates", json={"prompt": prompt, "mode": "check"})
        assert refused.status_code == told.status_code == 400 and "SECRET" not in refused.text + told.text
        assert refused.json()["error"] == (  # which field and why, or how many rows: admin's (test_holdout_columns)
            "dataset fholdout: its expected values do not fit this prompt's decision (its rows are not a "
            "repository's: which field, and why, is said to an admin token only)"
        )
        assert "none of the labels" in told.text or "not a number" in told.text, told.text
