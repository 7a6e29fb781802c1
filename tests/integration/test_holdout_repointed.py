"""A holdout re-pointed at a repository file keeps what it held (review of issue 33,
finding 3), end to end: `promptgate serve` on MariaDB, a worker process, the local model
server.

The review's attack: the operator registers a holdout from a path of the server's; a pull
request's check runs on it; later the default branch's gate config declares a dataset of
the same name from a repository file, and its sync (the admin's upload, then the sync)
re-points it. Readability was decided on the dataset's source *now*, so from then on any
read token previewed the holdout's old version and read the old run's failing items. It is
decided per version, from the source that version was imported from, and per run from the
version it pinned; a pull request's plan that would re-point a holdout says so."""

from __future__ import annotations

from support.workers_harness import WorkerFleet, worker_env

from gate.domain import Gate
from gate.gateconfig.changes import Change

ROWS = 6
SECRETS = ("H2SECRET", "h2-")
CONFIG = "datasets:\n  hold2: {source: data/hold2.csv}\nprompts:\n  p2:\n    - {dataset: hold2, min_accuracy: 0.9}\n"


def candidate() -> dict:
    return {
        "name": "p2",
        "model": "mock-1",
        "labels": ["urgent", "routine"],
        "messages": [
            {"role": "system", "content": "Classify the message.\n- urgent: down\ndefault: routine"},
            {"role": "user", "content": "{{ item.text }}"},
        ],
    }


def run_a_check_on_the_holdout(service, model, tmp_path) -> int:
    """The holdout (every text says down: the rules answer urgent, half the rows expect
    routine) and a submit token's check on it, run to its end: REJECTED, 3 failing items."""
    path = tmp_path / "hold2.csv"
    path.write_text(
        "item_id,expected_decision,text\n"
        + "".join(f"h2-{i},{'urgent' if i % 2 else 'routine'},H2SECRET-{i} down\n" for i in range(ROWS))
    )
    gate = Gate.connect(service.db_url)
    fleet = WorkerFleet(worker_env(service.db_url, model.base_url), tmp_path)
    try:
        gate.register_dataset("hold2", str(path))
        gate.map_dataset("p2", "hold2", "0.9")
        with service.client("submit") as ci:
            posted = ci.post("/v1/updates", json={"prompt": candidate(), "full": True})
        assert posted.status_code == 202, posted.text
        fleet.start(1)
        ended = gate.wait(posted.json()["id"], timeout=120, poll=0.1)
        assert ended.status == "REJECTED", (ended.update.reason, fleet.logs()[-2000:])
        return posted.json()["id"]
    finally:
        fleet.stop_all()
        gate.close()


def what_a_reader_gets(service, update_id: int) -> dict:
    with service.client("read") as reader:
        return {
            "old rows": reader.get("/v1/datasets/hold2/preview", params={"rows": 10, "version": "v1"}),
            "old version": reader.get("/v1/datasets/hold2/versions/v1"),
            "versions": reader.get("/v1/datasets/hold2/versions"),
            "report": reader.get(f"/v1/updates/{update_id}", params={"failures": 100}),
            "page": reader.get(f"/updates/{update_id}?samples=100"),
            "diff": reader.get("/v1/datasets/hold2/diff", params={"old": "v1", "new": "v2"}),
        }


def test_a_holdout_repointed_at_a_repository_file_keeps_its_old_versions_and_runs_hidden(service, model, tmp_path):
    update_id = run_a_check_on_the_holdout(service, model, tmp_path)
    with service.client("admin") as admin:
        failing = admin.get(f"/v1/updates/{update_id}", params={"failures": 100}).json()["runs"][0]["failures"]
    assert len(failing) == ROWS // 2  # what a reader must not get
    before = what_a_reader_gets(service, update_id)
    assert before["old rows"].status_code == 403

    with service.client("submit") as ci:  # the pull request that declares hold2 from a repository file
        plan = ci.post("/v1/sync", json={"config": CONFIG, "path": "gate.yaml", "dry_run": True, "files": ["hold2"]})
    assert plan.status_code == 200, plan.text
    flagged = [c for c in plan.json()["changes"] if c["kind"] == "dataset-published"]
    assert [c["subject"] for c in flagged] == ["hold2"], plan.text
    said = str(Change(**{**flagged[0], "key": tuple(flagged[0]["key"]), "details": ()}))
    assert said == (
        "dataset hold2: a holdout now (registered from outside the repository, its rows for admin only); declared "
        "from upload://data/hold2.csv, its new versions' rows are readable by every token (its older versions, and "
        "the items of the runs on them, stay admin-only)"
    )

    with service.client("admin") as admin:  # merged: the default branch's job uploads the file, then syncs
        up = admin.put(
            "/v1/datasets/hold2/rows",
            params={"path": "data/hold2.csv", "declared_in": "gate.yaml"},
            content=b"item_id,expected_decision,text\nnew-1,urgent,public row down\n",
        )
        assert up.status_code == 200, up.text
        synced = admin.post("/v1/sync", json={"config": CONFIG, "path": "gate.yaml", "files": ["hold2"]})
        assert synced.status_code == 200, synced.text
        assert "H2SECRET-0" in admin.get("/v1/datasets/hold2/preview", params={"version": "v1"}).text

    after = what_a_reader_gets(service, update_id)
    assert after["old rows"].status_code == 403, after["old rows"].text
    assert {name: got.status_code for name, got in after.items() if name != "old rows"} == dict.fromkeys(
        ("old version", "versions", "report", "page", "diff"), 200
    )
    for name, got in after.items():
        assert not any(s in got.text for s in SECRETS), (name, got.text[:600])
    assert "counts" not in after["old version"].json()["fields"]  # the old version: its totals only
    current = after["versions"].json()["versions"][0]
    assert current["number"] == 2 and current["fields"]["counts"] == {"text": 1}  # the repository's: all of it
    with service.client("read") as reader:
        new_rows = reader.get("/v1/datasets/hold2/preview", params={"rows": 10})
    assert new_rows.status_code == 200 and "public row down" in new_rows.text, new_rows.text
