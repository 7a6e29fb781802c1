"""Dataset files that travel with the client (issue 24, items 1 and 2), through a real
`promptgate serve` on MariaDB: ``PUT /v1/datasets/{name}/rows`` imports an uploaded file as a
local import would (admin), or compares it with the current version without storing
anything (dry_run, submit); a sync through the service uploads the gate config's file
datasets first; the server reads no file of its own."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from support.helpers import write_rule_rows

from gate.client.remote import RemoteGate
from gate.domain import Gate
from gate.errors import GateError, UsageError
from gate.gateconfig import load_config
from gate.prompt.spec import parse_spec

ROWS = "/v1/datasets/{}/rows"


def put(client, name: str, body: bytes, **params):
    return client.put(
        ROWS.format(name),
        content=body,
        params={"path": "datasets/d.csv", **params},
        headers={"content-type": "application/octet-stream"},
    )


def versions(gate: Gate, name: str) -> list[int]:
    return [v.id for v in gate.dataset_versions(name)[1]]


def test_an_upload_is_imported_as_a_local_import_would_be(service, tmp_path):
    data = write_rule_rows(tmp_path / "d.csv", 12).read_bytes()
    gate = Gate.connect(service.db_url)
    try:
        gate.register_dataset("local", str(tmp_path / "d.csv"))
        local_hash = gate.dataset_version("local").content_hash
        with service.client("submit") as ci:
            refused = put(ci, "up", data)
            assert refused.status_code == 403 and "needs admin" in refused.json()["error"]
        with service.client("admin") as admin:
            first = put(admin, "up", data, commit="a" * 40)
            assert first.status_code == 200, first.text
            assert first.json()["version"]["content_hash"] == local_hash  # the same rows, the same hash
            ds = gate.get_dataset("up")
            assert ds.source_uri == "upload://datasets/d.csv"
            assert ds.options["upload_path"] == "datasets/d.csv" and ds.options["upload_commit"] == "a" * 40
            again = put(admin, "up", data, commit="b" * 40)  # the same bytes at a later commit
            assert again.status_code == 200 and versions(gate, "up") == [first.json()["version"]["id"]]
            changed = data.replace(b"i3,yes", b"i3,no")
            second = put(admin, "up", changed, commit="c" * 40)
            assert second.status_code == 200 and len(versions(gate, "up")) == 2
            assert gate.dataset_version("up").source_options["upload_commit"] == "c" * 40
            kept = versions(gate, "up")

            # the local import's limits and checks, one line each, nothing half-written
            dupes = put(admin, "up", data + b"i3,yes,alpha again\n")
            assert dupes.status_code == 400 and "duplicate item ids: i3" in dupes.json()["error"]
            wide = put(admin, "up", data + b"big,yes," + b"x" * 70000 + b"\n")
            assert wide.status_code == 400 and "limit" in wide.json()["error"]
            kind = put(admin, "up", data, path="datasets/d.txt")
            assert kind.status_code == 400 and "unsupported file type" in kind.json()["error"]
            jsonl = put(
                admin, "j", b'{"item_id": "a", "expected_decision": "yes", "text": "t"}\n', path="datasets/j.jsonl"
            )
            assert jsonl.status_code == 200 and jsonl.json()["version"]["row_count"] == 1
            assert versions(gate, "up") == kept and gate.dataset_version("up").id == kept[0]
            new_bad = put(admin, "never", b"item_id,expected_decision\n")
            assert new_bad.status_code == 400 and "has no rows" in new_bad.json()["error"]
            assert "never" not in {d.name for d, _ in gate.list_datasets()}  # a failed first upload leaves nothing

            # the server reads no file: the path names the rows, it is never opened
            for path in ("/etc/passwd", "../gate.yaml", "datasets/../../x.csv"):
                bad = put(admin, "up", data, path=path)
                assert bad.status_code == 400 and "is not a file's path in the repository" in bad.json()["error"]
            on_server = put(admin, "srv", b"", path="prompts-example/datasets/urgency-regression.csv")
            assert on_server.status_code == 400 and "CSV file has no header row" in on_server.json()["error"]
            refresh = admin.post("/v1/datasets/up/refresh")
            assert refresh.status_code == 400 and "refresh it by uploading the file again" in refresh.json()["error"]
    finally:
        gate.close()


def test_an_upload_over_the_cap_is_refused_before_it_is_stored(mysql_url, tmp_path):
    from support.service_harness import Service

    service = Service(mysql_url, tmp_path, "--max-upload-bytes", "4000")
    try:
        data = write_rule_rows(tmp_path / "d.csv", 200).read_bytes()
        assert len(data) > 4000
        with service.client("admin") as admin:
            declared = put(admin, "d", data)
            assert declared.status_code == 413 and "larger than 4000 bytes" in declared.json()["error"]
            chunked = admin.put(
                ROWS.format("d"), content=iter([data[:3000], data[3000:]]), params={"path": "datasets/d.csv"}
            )
            assert chunked.status_code == 413, chunked.text
            assert "--max-upload-bytes" in chunked.json()["error"]
            small = put(admin, "d", data[:3000].rsplit(b"\n", 1)[0] + b"\n")
            assert small.status_code == 200, small.text
            unauth = admin.put(
                ROWS.format("d"),
                content=data,
                params={"path": "datasets/d.csv"},
                headers={"Authorization": "Bearer nope"},
            )
            assert unauth.status_code == 413  # a declared length over the cap: refused unread
        with service.client(None) as anonymous:
            assert put(anonymous, "d", data[:100]).status_code == 401
    finally:
        service.stop()


def test_a_pull_request_compares_only_a_file_a_gate_config_declares(service, tmp_path):
    base = write_rule_rows(tmp_path / "d.csv", 10).read_bytes()
    gate = Gate.connect(service.db_url)
    try:
        with service.client("admin") as admin:
            assert put(admin, "d", base, declared_in="gate.yaml").status_code == 200
            assert put(admin, "other", base, path="other/d.csv").status_code == 200  # not from a gate config
        gate.register_dataset("holdout", str(tmp_path / "d.csv"))  # a private holdout
        proposed = (
            base.replace(b"i1,yes", b"i1,no").replace(b"i9,yes,alpha message 9\r\n", b"") + b"n1,yes,alpha new\r\n"
        )
        before = versions(gate, "d")
        with service.client("read") as reader:
            assert put(reader, "d", proposed, dry_run="true").status_code == 403
        with service.client("submit") as ci:
            shown = put(ci, "d", proposed, dry_run="true")
            assert shown.status_code == 200, shown.text
            diff = shown.json()
            assert (diff["added"], diff["removed"], diff["relabelled"]) == (1, 1, 1)
            assert diff["examples"]["relabelled"] == ["i1: yes → no"]
            for name, path in (("holdout", "datasets/d.csv"), ("other", "other/d.csv"), ("d", "elsewhere/d.csv")):
                refused = put(ci, name, proposed, dry_run="true", path=path)
                assert refused.status_code == 400, (name, refused.text)
                assert "compares only the dataset files its gate config declares" in refused.json()["error"]
            assert put(ci, "d", proposed).status_code == 403  # storing needs admin
        assert versions(gate, "d") == before
        from gate.gateconfig.remote import row_changes_remote

        remote = RemoteGate(service.url, service.tokens["submit"])
        try:
            (tmp_path / "pr").mkdir()
            (tmp_path / "pr" / "d.csv").write_bytes(proposed)
            changes = row_changes_remote(remote, {"datasets/d.csv", "other/d.csv"}, lambda p: tmp_path / "pr" / "d.csv")
            assert [(c.kind, c.subject, c.after) for c in changes] == [
                ("dataset-rows", "d", "1 added, 1 removed, 1 relabelled")
            ]
        finally:
            remote.close()
    finally:
        gate.close()


def write_config(folder: Path, datasets: dict, **entry) -> Path:
    (folder / "datasets").mkdir(parents=True, exist_ok=True)
    config = folder / "gate.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "datasets": {name: {"source": f"datasets/{name}.csv"} for name in datasets},
                "prompts": {
                    "p1": [{"dataset": name, "min_accuracy": 0.5, **copy.deepcopy(entry)} for name in datasets]
                },
            }
        )
    )
    for name, rows in datasets.items():
        (folder / "datasets" / f"{name}.csv").write_text(rows)
    return config


def test_a_sync_through_the_service_uploads_its_files_and_a_failure_is_completed_next_time(service, tmp_path):
    from gate.gateconfig.remote import sync_remote

    good = write_rule_rows(tmp_path / "g.csv", 8).read_text()
    config = write_config(
        tmp_path / "repo",
        {"a": good, "b": good + "i1,yes,alpha again\n"},  # b: a duplicate id
        accept_breaks=[{"item": "i3", "reason": "either answer is fair"}],
    )
    remote = RemoteGate(service.url, service.tokens["admin"])
    gate = Gate.connect(service.db_url)
    try:
        cfg = load_config(config, display_path="gate.yaml")
        with pytest.raises(GateError, match="dataset b: duplicate item ids: i1"):
            sync_remote(remote, cfg, config.read_text(), commit="1" * 40)
        assert {d.name for d, _ in gate.list_datasets()} == {"a"} and gate.mappings() == []  # bars untouched
        with pytest.raises(UsageError, match="dataset b: its rows were not uploaded"):  # the server checks
            remote.sync_config(config.read_text(), "gate.yaml", files=["a", "b"])
        (tmp_path / "repo" / "datasets" / "b.csv").write_text(good)
        done = sync_remote(remote, cfg, config.read_text(), commit="2" * 40)
        assert done.applied and {str(c) for c in done.changes} >= {
            "dataset b: new, source upload of datasets/b.csv",
            "bar p1 × a: new, min accuracy 0.5, 1 accepted break (i3)",
        }
        assert {m.dataset_name for m in gate.mappings("p1")} == {"a", "b"}
        assert {m.dataset_name: m.bars["accept_breaks"] for m in gate.mappings("p1")}["a"] == [
            {"item": "i3", "reason": "either answer is fair", "commit": "2" * 40}
        ]  # the commit synced at
        snapshot = {name: versions(gate, name) for name in ("a", "b")}
        again = sync_remote(remote, cfg, config.read_text(), commit="3" * 40)
        assert again.changes == () and {name: versions(gate, name) for name in ("a", "b")} == snapshot
        plan = sync_remote(remote, cfg, config.read_text(), dry_run=True)
        assert plan.changes == ()
        # without the marker the service still reads no file of a config
        with pytest.raises(UsageError, match="the service reads no file on its machine"):
            remote.sync_config(config.read_text(), "gate.yaml")
    finally:
        gate.close()
        remote.close()


def test_the_cli_uploads_a_file_through_the_service_and_shows_where_it_came_from(service, tmp_path):
    from support.cli import run_cli

    env = {"PROMPTGATE_URL": service.url, "PROMPTGATE_TOKEN": service.tokens["admin"], "PROMPTGATE_DATABASE_URL": ""}
    data = write_rule_rows(tmp_path / "d.csv", 6)
    added = run_cli("dataset", "add", "d", "--source", "d.csv", env=env, cwd=tmp_path)
    assert added.returncode == 0 and "dataset d: upload://d.csv, version" in added.stdout, added.stderr
    refused = run_cli("dataset", "refresh", "d", env=env, cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "this dataset's rows were uploaded: refresh it by uploading the file again" in refused.stderr
    data.write_text(data.read_text().replace("i2,no", "i2,yes"))
    again = run_cli("dataset", "refresh", "d", "--file", data, "--json", env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    listed = run_cli("dataset", "versions", "d", "--json", env=env, cwd=tmp_path)
    assert [v.get("path") for v in json.loads(listed.stdout)] == ["d.csv", "d.csv"]
    with service.client("admin") as admin:
        assert put(admin, "d", data.read_bytes(), path="d.csv", commit="f" * 40).status_code == 200
        data.write_text(data.read_text().replace("i4,no", "i4,yes"))
        assert put(admin, "d", data.read_bytes(), path="d.csv", commit="e" * 40).status_code == 200
        page = admin.get("/datasets")
        assert "upload://d.csv @ eeeeeeeeeeee" in page.text
    text = run_cli("dataset", "versions", "d", env=env, cwd=tmp_path)
    assert "upload://d.csv @ eeeeeeeeeeee" in text.stdout.splitlines()[0], text.stdout
    local = run_cli(
        "dataset",
        "refresh",
        "d",
        "--file",
        data,
        "--database-url",
        service.db_url,
        cwd=tmp_path,
        env={"PROMPTGATE_URL": "", "PROMPTGATE_TOKEN": ""},
    )
    assert local.returncode == 2 and "--file uploads a file to the gate's service" in local.stderr


def test_a_linked_dataset_file_is_never_sent(service, github, tmp_path):
    """A file of the checkout that is a symbolic link to a file outside it (a runner's
    secret) is not uploaded, neither by a sync nor by a pull request's comparison."""
    from support.action_harness import HEAD2, act, github_env, pr_payload

    from gate.gateconfig.remote import sync_remote

    secret = tmp_path / "runner-secret.csv"
    secret.write_text("item_id,expected_decision\nTOPSECRET,yes\n")
    good = write_rule_rows(tmp_path / "g.csv", 8).read_text()
    repo = tmp_path / "repo"
    config = write_config(repo, {"a": good})
    admin = RemoteGate(service.url, service.tokens["admin"])
    try:
        sync_remote(admin, load_config(config, display_path="gate.yaml"), config.read_text())
        before = admin.dataset_versions("a")[1]
        (repo / "datasets" / "a.csv").unlink()
        (repo / "datasets" / "a.csv").symlink_to(secret)
        with pytest.raises(UsageError, match="resolves outside the gate config's folder"):
            sync_remote(admin, load_config(config, display_path="gate.yaml"), config.read_text())
        github.add_pull(41, HEAD2, ["datasets/a.csv"])
        env = github_env(tmp_path, github, repo, "pull_request", pr_payload(41, HEAD2), "m" * 40, "refs/pull/41/merge")
        submit = RemoteGate(service.url, service.tokens["submit"])
        try:
            code, log = act(env, submit, gate_config="gate.yaml", run_workers=False)
        finally:
            submit.close()
        (body,) = [c["body"] for c in github.comments_on(41)]
        assert "outside the workspace" in body and "TOPSECRET" not in body, body
        assert admin.dataset_versions("a")[1] == before
    finally:
        admin.close()


def test_a_holdouts_rows_are_read_with_an_admin_token_only(service, tmp_path):
    """Hostile review: the upload route refused to diff a private holdout, but preview, diff
    and the dataset page handed its rows to any read token (a pull request's submit token
    too). Rows a repository holds (an uploaded file a gate config declares) stay readable."""
    gate = Gate.connect(service.db_url)
    try:
        gate.register_dataset("holdout", str(write_rule_rows(tmp_path / "h.csv", 10)))  # the operator's
        old = gate.dataset_version("holdout").id
        with service.client("admin") as admin:
            assert (
                put(
                    admin, "repo", write_rule_rows(tmp_path / "d.csv", 10).read_bytes(), declared_in="gate.yaml"
                ).status_code
                == 200
            )
            assert len(admin.get("/v1/datasets/holdout/preview").json()["first_rows"]) == 10
        for scope in ("read", "submit"):
            with service.client(scope) as reader:
                refused = reader.get("/v1/datasets/holdout/preview")
                assert refused.status_code == 403 and "holdout" in refused.json()["error"], refused.text
                counts = reader.get("/v1/datasets/holdout/preview", params={"rows": 0})
                assert counts.status_code == 200 and counts.json()["first_rows"] == []
                diff = reader.get("/v1/datasets/holdout/diff", params={"old": old, "new": old}).json()
                assert all(examples == [] for examples in diff["examples"].values())
                assert len(reader.get("/v1/datasets/repo/preview").json()["first_rows"]) == 10
                page = reader.get("/datasets/holdout")
                assert page.status_code == 200 and "an admin token reads them" in page.text
                assert "i1" not in page.text.split("Preview of", 1)[1]
    finally:
        gate.close()


def test_a_holdouts_items_never_reach_a_non_admin_report(service, tmp_path, model):
    """Hostile review: preview, diff and the dataset page kept a holdout's rows to admin, but
    an update's report handed any read token (a pull request's submit token too) the items
    it failed, broke or wavered on: their ids, expected labels and the model's answers — and
    the pull request writes the prompt, so the answer can repeat the item's text. Its own
    check against the holdout, ``failures=100``, then read the holdout back. A holdout's
    item samples are for admin only; the counts, bars and verdict stay for every reader."""
    from workers.supervisor import run_until_terminal

    weak = parse_spec(
        {
            "name": "p1",
            "model": "mock-1",
            "messages": [
                {"role": "system", "content": "Classify the message.\ndefault: yes"},
                {"role": "user", "content": "{{ item.text }}"},
            ],
        }
    )
    gate = Gate.connect(service.db_url)
    try:
        gate.register_dataset("holdout", str(write_rule_rows(tmp_path / "h.csv", 20)))  # the operator's
        gate.map_dataset("p1", "holdout", "0.9")
        with service.client("submit") as ci:
            posted = ci.post("/v1/updates", json={"prompt": weak.to_config(), "mode": "check"})
            assert posted.status_code == 202, posted.text
            update_id = posted.json()["id"]
        (ended,) = run_until_terminal(gate, [update_id], timeout=120)
        assert ended.status == "REJECTED" and ended.runs[0].failures  # half the items fail
        with service.client("admin") as admin:
            report = admin.get(f"/v1/updates/{update_id}", params={"failures": 100}).json()
            assert {f["item_id"] for f in report["runs"][0]["failures"]} >= {"i0", "i2"}
        for scope in ("read", "submit"):
            with service.client(scope) as reader:
                for route, params in (
                    ("", {"failures": 100}),
                    ("", {"failures": 100, "view": "wire"}),
                    ("/wait", {"failures": 100, "timeout": 1}),
                ):
                    got = reader.get(f"/v1/updates/{update_id}{route}", params=params)
                    assert got.status_code == 200, got.text
                    text = got.text
                    assert '"i0"' not in text and '"i2"' not in text, (scope, route, params)
                    run = got.json()["runs"][0]
                    assert run["matches"] == 10 and run["scored"] == 20  # the figures stay
                page = reader.get(f"/updates/{update_id}", params={"samples": 100})
                assert page.status_code == 200 and ">i2<" not in page.text and "i2</" not in page.text
    finally:
        gate.close()
