"""The status page's dataset page (issue 24, frictions 6 and 7): `/datasets/NAME` shows a
dataset's versions numbered per dataset (v1, v2 …, the current one marked), the prompts
gated on it with their bars, and the first rows of its current version; every dataset name
on the status page links to it. A hostile row renders as text. Drawn by Debian's headless
Chromium on a real `promptgate serve` (MariaDB), screenshot at 800 px wide."""

from __future__ import annotations

import json
import re
import shutil

import httpx2
import pytest
from support.cli import run_cli
from support.helpers import rules_spec, write_rule_rows
from support.service_harness import Service
from test_status_page import ARTIFACTS, HOSTILE_ID, Browser, write_dataset

from gate.domain import Gate


@pytest.fixture
def public_service(mysql_url, tmp_path):
    svc = Service(mysql_url, tmp_path, "--public-read")
    yield svc
    svc.stop()


def test_the_dataset_page(public_service, chromium, tmp_path):
    svc, browser = public_service, Browser(chromium, tmp_path / "chromium-profile")
    gate = Gate.connect(svc.db_url)
    try:
        tickets = write_dataset(tmp_path / "tickets.csv")  # 13 rows, one of them markup
        gate.register_dataset("tickets", str(tickets), declared_in="gate.yaml")  # a repository's: rows shown
        gate.map_dataset("support-triage", "tickets", "0.6", bars={"max_broken": 0})
        write_rule_rows(tmp_path / "more.csv", 14)
        tickets.write_text((tmp_path / "more.csv").read_text() + tickets.read_text().splitlines()[-1] + "\n")
        gate.refresh_dataset("tickets")  # v2: 15 rows
        gate.register_dataset("other", str(write_rule_rows(tmp_path / "other.csv", 3)))
        other_id = gate.dataset_version("other").id
        update_id = gate.submit(rules_spec("support-triage"), "check", source={"key": "pending"})
    finally:
        gate.close()
    assert other_id == 3  # the global id: not its number

    with httpx2.Client(base_url=svc.url, timeout=30) as web:
        for path in ("/datasets", "/prompts/support-triage", f"/updates/{update_id}"):
            assert 'href="/datasets/tickets"' in web.get(path).text, path  # every dataset name links to its page
        missing = web.get("/datasets/nope")
        assert missing.status_code == 404 and "unknown dataset" in missing.text and "Traceback" not in missing.text
        assert web.get("/datasets/" + "x" * 200).status_code == 404

    remote = {"PROMPTGATE_TOKEN": svc.tokens["read"]}  # the CLI through the service says v1, v2 too
    listed = run_cli("dataset", "versions", "tickets", "--gate-url", svc.url, env=remote)
    assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == ["* v2", "  v1"], listed.stderr
    old = run_cli("dataset", "preview", "tickets", "--version", "v1", "--json", "--gate-url", svc.url, env=remote)
    assert old.returncode == 0 and json.loads(old.stdout)["version_number"] == 1, old.stderr
    by_id = run_cli("dataset", "preview", "tickets", "--version", "1", "--json", "--gate-url", svc.url, env=remote)
    assert json.loads(by_id.stdout) == json.loads(old.stdout)
    wrong = run_cli("dataset", "preview", "tickets", "--version", "v9", "--gate-url", svc.url, env=remote)
    assert wrong.returncode == 2 and wrong.stderr.strip() == "error: dataset tickets has no version v9", wrong.stderr

    page = browser.dom(f"{svc.url}/datasets/tickets")
    assert page.title == "tickets · prompt-gate" and "img" not in page.tags
    rows = page.rows()
    versions = [r for r in rows if r and re.fullmatch(r"v\d+ id \d+", r[0])]
    assert [r[:3] for r in versions] == [["v2 id 2", "current", "15"], ["v1 id 1", "", "13"]]
    assert ["support-triage", "60%", "max broken 0"] in rows
    preview = [r for r in rows if len(r) == 3 and re.fullmatch(r"i\d+", r[0])]
    assert preview[0][:2] == ["i0", "no"] and '"text": "beta message 0"' in preview[0][2]
    assert HOSTILE_ID in page.text and "Preview of v2" in page.text and "All 15 rows" in page.text
    assert re.search(r"v1 id 3", browser.dom(f"{svc.url}/datasets/other").text)

    shot = tmp_path / "status-page-dataset.png"
    browser._run(f"{svc.url}/datasets/tickets", f"--screenshot={shot}", "--window-size=800,1400")
    assert shot.stat().st_size > 10_000, "the screenshot is (nearly) empty"
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(shot, ARTIFACTS / shot.name)
