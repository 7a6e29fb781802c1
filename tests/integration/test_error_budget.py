"""The error budget end to end (issue 38): ``max_error_rate`` declared in the gate config or
by `dataset map --max-error-rate`, pinned at submit, and a real run whose items the provider
cannot answer (HTTP 400 for each of them, not retryable): at the budget the update is judged
on the items scored and says how many were not and which; one error more, or any with the
default of 0, and it FAILED. The report and `status --json` carry it."""

from __future__ import annotations

import csv
import json

import yaml
from support.cli import run_cli
from support.helpers import rules_spec

from gate import gateconfig
from gate.mockllm import MockLLMServer
from gate.report.text import render_text
from gate.states import UpdateStatus
from workers.supervisor import run_until_terminal

ITEMS = 20


def write_rows(path, failing: set[int]):
    """20 rows the server's rules answer right; those in ``failing`` answered HTTP 400."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "text"])
        for i in range(ITEMS):
            w.writerow([f"i{i}", "yes", "alpha" + ("\nstatus: 400" if i in failing else "")])
    return path


def gate_config(tmp_path, failing: set[int], **bar) -> None:
    write_rows(tmp_path / "d.csv", failing)
    config = {
        "datasets": {"d": {"source": "d.csv"}},
        "prompts": {"p1": [{"dataset": "d", "min_accuracy": 1, **bar}]},
    }
    (tmp_path / "gate.yaml").write_text(yaml.safe_dump(config))


def scored(gate, monkeypatch, llm) -> object:
    monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
    (report,) = run_until_terminal(gate, [gate.submit(rules_spec("p1"), "apply")], timeout=90)
    return report


def test_errors_at_the_budget_are_judged_on_the_items_scored(gate, tmp_path, monkeypatch):
    gate_config(tmp_path, {3, 11}, max_error_rate=0.1)  # 2 of 20: exactly 10 %
    gateconfig.sync(gate, tmp_path / "gate.yaml")
    with MockLLMServer() as llm:
        report = scored(gate, monkeypatch, llm)
    run = report.runs[0]
    assert report.status == UpdateStatus.APPLIED, report.update.reason
    assert (run.status, run.total, run.scored, run.matches, run.errors) == ("DONE", 20, 18, 18, 2)
    assert "100.0% ≥ 100% of the 18 items scored; 2 could not be scored" in report.update.reason
    budget = next(c for c in run.checks if c["bar"] == "max_error_rate")
    assert (budget["limit"], budget["value"], budget["state"]) == ("10%", "10.0%", "pass")
    assert budget["note"] == "2 of 20 items could not be scored (bad_request: 2); see the failing items"
    assert sorted(f.item_id for f in run.failures if f.verdict == "ERROR") == ["i11", "i3"]  # which ones
    text = render_text(report)
    assert "18/20 scored, 2 errors (of the 18 items scored; 2 could not be scored)" in text
    assert "bar items that could not be scored 10%: 10.0% [pass]" in text
    status = json.loads(
        run_cli("status", report.update.id, "--json", "--database-url", gate.settings.database_url).stdout
    )
    (checked,) = [c for c in status["runs"][0]["checks"] if c["bar"] == "max_error_rate"]
    assert checked["value"] == "10.0%" and status["runs"][0]["errors"] == 2
    assert status["runs"][0]["pinned"]["bars"]["max_error_rate"] == "0.1"


def test_one_error_over_the_budget_fails_the_update(gate, tmp_path, monkeypatch):
    gate_config(tmp_path, {3, 11, 12}, max_error_rate=0.1)  # 3 of 20: 15 %
    gateconfig.sync(gate, tmp_path / "gate.yaml")
    with MockLLMServer() as llm:
        report = scored(gate, monkeypatch, llm)
    assert report.status == UpdateStatus.FAILED
    assert report.runs[0].status == "ERROR"
    assert (
        "3 of 20 items of d could not be scored (bad_request: 3; see the failing items); "
        "more than its max_error_rate of 10%" in report.update.reason
    )


def test_by_default_one_error_fails_the_update_and_the_cli_maps_a_budget(gate, tmp_path, monkeypatch):
    gate_config(tmp_path, {5})
    gateconfig.sync(gate, tmp_path / "gate.yaml")
    with MockLLMServer() as llm:
        report = scored(gate, monkeypatch, llm)
        assert report.status == UpdateStatus.FAILED  # 19 of 20 right, one unscorable, no budget
        url = gate.settings.database_url
        mapped = run_cli(
            "dataset", "map", "p1", "d", "--min-accuracy", "1", "--max-error-rate", "0.05", "--database-url", url
        )
        assert mapped.returncode == 0, mapped.stderr
        assert "at most 5% of items unscorable" in mapped.stdout
        refused = run_cli(
            "dataset", "map", "p1", "d", "--min-accuracy", "1", "--max-error-rate", "1", "--database-url", url
        )
        assert refused.returncode == 2 and refused.stderr.strip().count("\n") == 0
        assert "max_error_rate '1' is out of range: below 1" in refused.stderr
        again = scored(gate, monkeypatch, llm)  # 1 of 20: exactly 5 %
    assert again.status == UpdateStatus.APPLIED, again.update.reason
