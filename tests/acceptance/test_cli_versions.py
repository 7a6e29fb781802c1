"""The CLI over dataset versions, answer reuse and retention, as a user runs it: refresh
makes a version only when rows change, versions/diff/preview show what a verdict stood on,
submit --no-reuse calls every item again, and prune deletes old evidence but never what a
live prompt stands on."""

from __future__ import annotations

import json
from pathlib import Path

from support.helpers import RULES
from support.workers_harness import WorkerFleet, worker_env
from test_cli import cli, prompt_file

from gate.mockllm import MockLLMServer


def write_rows(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    path.write_text("item_id,expected_decision,text\n" + "".join(f"{i},{label},{text}\n" for i, label, text in rows))
    return path


ROWS = [(f"r{i}", "yes" if i % 2 else "no", f"{'alpha' if i % 2 else 'beta'} {i}") for i in range(10)]


def test_versions_diff_preview_and_refresh(db_url, tmp_path):
    assert cli(db_url, "db", "upgrade").returncode == 0
    data = write_rows(tmp_path / "d.csv", ROWS)
    added = cli(db_url, "dataset", "add", "d", "--source", data, "--json")
    assert added.returncode == 0, added.stderr
    v1 = json.loads(added.stdout)["version"]
    assert v1["rows"] == 10 and v1["labels"] == {"no": 5, "yes": 5} and v1["current"]

    again = json.loads(cli(db_url, "dataset", "refresh", "d", "--json").stdout)["version"]
    assert again["id"] == v1["id"]  # same rows: no new version

    edited = [r for r in ROWS if r[0] != "r2"]  # r2 removed
    edited[0] = ("r0", "yes", ROWS[0][2])  # r0 relabelled
    edited[1] = ("r1", "yes", "alpha one reworded")  # r1's input changed
    write_rows(data, edited + [("r10", "no", "beta 10")])  # r10 added
    refreshed = cli(db_url, "dataset", "refresh", "d")
    assert refreshed.returncode == 0 and "11 rows" not in refreshed.stdout and "10 rows" in refreshed.stdout
    v2 = json.loads(cli(db_url, "dataset", "versions", "d", "--json").stdout)
    assert [v["current"] for v in v2] == [True, False] and v2[1]["id"] == v1["id"]
    assert [v["number"] for v in v2] == [2, 1]
    listing = cli(db_url, "dataset", "versions", "d").stdout.splitlines()
    assert listing[0].startswith("* v2\t") and listing[1].startswith("  v1\t")  # numbered per dataset
    other = cli(db_url, "dataset", "add", "e", "--source", write_rows(tmp_path / "e.csv", ROWS[:3]), "--json")
    e1 = json.loads(other.stdout)["version"]
    assert e1["number"] == 1 and e1["id"] == v2[0]["id"] + 1, e1  # its first version: v1, whatever its id
    assert "version v1 (3 rows" in cli(db_url, "dataset", "refresh", "e").stdout

    diff = cli(db_url, "dataset", "diff", "d", v1["id"], v2[0]["id"])
    assert diff.returncode == 0, diff.stderr
    assert "1 added, 1 removed, 1 relabelled, 1 changed" in diff.stdout
    assert "removed: r2" in diff.stdout and "relabelled: r0" in diff.stdout
    assert diff.stdout.startswith("d v1 → v2: ")  # a global id names the same versions
    by_number = cli(db_url, "dataset", "diff", "d", "v1", "v2")
    assert by_number.returncode == 0 and by_number.stdout == diff.stdout, by_number.stderr
    as_json = json.loads(cli(db_url, "dataset", "diff", "d", v1["id"], v2[0]["id"], "--json").stdout)
    assert (as_json["added"], as_json["removed"], as_json["relabelled"], as_json["changed"]) == (1, 1, 1, 1)

    old = json.loads(cli(db_url, "dataset", "preview", "d", "--version", v1["id"], "--rows", "3", "--json").stdout)
    assert [r["item_id"] for r in old["rows"]] == ["r0", "r1", "r2"] and old["version"] == v1["id"]
    assert old["version_number"] == 1
    assert json.loads(cli(db_url, "dataset", "preview", "d", "--version", "v1", "--rows", "3", "--json").stdout) == old
    current = json.loads(cli(db_url, "dataset", "preview", "d", "--rows", "3", "--json").stdout)
    assert "r2" not in [r["item_id"] for r in current["rows"]] and current["row_count"] == 10

    missing = cli(db_url, "dataset", "diff", "d", v1["id"], 999)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1, missing.stderr
    for ref in ("v3", e1["id"], "x1"):  # no third version; e's version is not d's; not a version at all
        wrong = cli(db_url, "dataset", "preview", "d", "--version", ref)
        assert wrong.returncode == 2 and len(wrong.stderr.strip().splitlines()) == 1, wrong.stderr


def test_reuse_no_reuse_and_prune(db_url, tmp_path):
    assert cli(db_url, "db", "upgrade").returncode == 0
    data = write_rows(tmp_path / "d.csv", ROWS)
    assert cli(db_url, "dataset", "add", "d", "--source", data).returncode == 0
    assert cli(db_url, "dataset", "map", "p1", "d", "--min-accuracy", "0.9").returncode == 0
    good = prompt_file(tmp_path / "good.yaml", rules=RULES)
    with MockLLMServer() as llm:
        fleet = WorkerFleet(worker_env(db_url, llm.base_url), tmp_path)
        fleet.start(1)
        try:

            def submit_and_wait(*flags) -> dict:
                uid = cli(db_url, "submit", good, "--mode", "apply", *flags).stdout.strip()
                done = cli(db_url, "wait", uid, "--timeout", "60", "--json")
                assert done.returncode == 0, done.stdout + done.stderr
                return json.loads(done.stdout)

            first = submit_and_wait()
            calls = llm.stats()["requests"]
            second = submit_and_wait()  # the very same requests: nothing to call
            assert llm.stats()["requests"] == calls == 10
            assert second["runs"][0]["reused"] == {str(first["id"]): 10}
            text = cli(db_url, "status", second["id"]).stdout
            assert f"10 of 10 answers reused from update {first['id']}" in text
            third = submit_and_wait("--no-reuse")
            assert llm.stats()["requests"] == 20 and third["runs"][0]["reused"] == {}
        finally:
            fleet.stop_all()

    would = json.loads(cli(db_url, "prune", "--older-than", "0s", "--dry-run", "--json").stdout)
    assert would["runs"] == 2 and would["items"] == 20  # the live update's run is kept
    assert json.loads(cli(db_url, "prune", "--older-than", "0s", "--json").stdout) == {**would, "dry_run": False}
    live = json.loads(cli(db_url, "status", third["id"], "--json").stdout)
    assert live["runs"][0]["total"] == 10 and live["status"] == "APPLIED"
    kept = cli(db_url, "wait", third["id"], "--timeout", "1")
    assert kept.returncode == 0 and "10/10 scored" in kept.stdout
    assert cli(db_url, "prune", "--older-than", "soon").returncode == 2
