"""Reports survive the wire: real reports of real runs (in-process workers, the local model
server), encoded by ``gate.contract.codec``, sent through JSON and decoded, are the very same
reports, so the CLI prints a report it read over HTTP to the same text, Markdown and
``--json`` as one read from the database."""

from __future__ import annotations

import json
import time
from decimal import Decimal
from pathlib import Path

from gate.contract.codec import decode, encode
from gate.gateconfig import Change, SyncResult
from gate.prompt.spec import load_spec, parse_spec
from gate.records import Price
from gate.report.markdown import render_markdown, render_report_markdown
from gate.report.text import render_text
from gate.report.update import UpdateReport
from workers.supervisor import WorkerProcess, run_until_terminal

EXAMPLE = Path(__file__).resolve().parents[2] / "prompts-example"


def through_json(cls, value):
    return decode(cls, json.loads(json.dumps(encode(value), ensure_ascii=True)))


def weaker(live):
    """The live prompt with two urgent rules dropped: it breaks items live gets right."""
    config = live.to_config()
    system = config["messages"][0]["content"].replace("charged twice, ", "").replace("crash*, ", "")
    return parse_spec({**config, "messages": [{**config["messages"][0], "content": system}, *config["messages"][1:]]})


def running_report(gate, spec) -> UpdateReport:
    """An update whose run is open: items materialized, none scored (no execute role)."""
    update_id = gate.submit(spec, "check", {"key": "running"})
    worker = WorkerProcess(gate.engine, gate.settings, ["materialize"]).start()
    try:
        deadline = time.monotonic() + 30
        while not gate.status(update_id).runs[0].total and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.shutdown()
    return gate.status(update_id)


def test_real_reports_round_trip_to_the_same_text_markdown_and_json(mysql_gate, model):
    gate = mysql_gate
    gate.register_dataset("urgency-regression", str(EXAMPLE / "datasets" / "urgency-regression.csv"))
    gate.map_dataset(
        "ticket-urgency",
        "urgency-regression",
        "0.5",
        bars={"max_broken": 0, "max_latency_p95_ms": 60000, "max_cost_per_1k_items": "1"},
    )
    gate.set_price(Price("gpt-4o-mini", Decimal("0.15"), Decimal("0.60")))
    live = load_spec(EXAMPLE / "prompts" / "ticket-urgency.yaml")
    (applied,) = run_until_terminal(gate, [gate.submit(live, "apply")], timeout=60)
    (compared,) = run_until_terminal(gate, [gate.submit(weaker(live), "check", {"key": "pr-1"})], timeout=60)
    cancelled = gate.submit(live, "check", {"key": "pr-2"})
    gate.cancel(cancelled)
    reports = [
        applied,
        compared,
        gate.status(compared.update.id, failures=50),
        gate.status(cancelled),
        running_report(gate, weaker(live)),
    ]

    assert [r.status for r in reports] == ["APPLIED", "REJECTED", "REJECTED", "CANCELLED", "RUNNING"]
    assert applied.runs[0].cost and compared.runs[0].comparison and compared.runs[0].broken  # what is exercised
    assert reports[-1].runs[0].total and not reports[-1].runs[0].scored
    for report in reports:
        back = through_json(UpdateReport, report)
        assert render_text(back) == render_text(report)
        assert render_report_markdown(back, samples=50) == render_report_markdown(report, samples=50)
        assert back.to_dict() == report.to_dict()
        assert back == report
    assert render_markdown(
        [through_json(UpdateReport, r) for r in reports], context={"sha": "a" * 40}
    ) == render_markdown(reports, context={"sha": "a" * 40})


def test_a_sync_result_round_trips():
    result = SyncResult(
        "gate.yaml",
        (
            Change("bar-added", "p × d", None, "0.9", ("p", "d")),
            Change("dataset-rows", "d", "3", "1 added", ("d",), ("added: x",)),
        ),
        True,
    )
    assert through_json(SyncResult, result) == result
