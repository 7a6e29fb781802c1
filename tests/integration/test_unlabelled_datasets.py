"""A judged prompt's dataset needs no label column (issue 50.6): its judge reads the answers,
so `sync --dry-run` no longer refuses a CSV of tickets without ``expected_decision``, and
the report shows no "expected" the rows do not have (a team added a dummy column, which then
showed as "expected n/a" and a confusion row "n/a | 16 | 14"). A prompt decided by label on
such a dataset is refused at submit, naming the label column: never scored against nothing."""

from __future__ import annotations

import csv

import pytest
import yaml
from click.testing import CliRunner
from support.helpers import spec
from support.judging import TOPICS, WEAK_REPLIES, judge_spec, reply_spec, write_labels

from gate import gateconfig
from gate.cli import cli
from gate.errors import DatasetError
from gate.mockllm import MockLLMServer
from gate.prompt.structured.summary import RuleMisfit
from gate.report.markdown import render_report_markdown
from gate.report.text import render_text
from workers.supervisor import run_until_terminal


def write_unlabelled_tickets(path, n: int = 12):
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "ticket"])
        for i in range(n):
            w.writerow([f"t{i}", TOPICS[i % 3].format(i=i)])
    return path


def test_a_judged_prompt_is_gated_on_tickets_without_labels(mysql_gate, tmp_path, monkeypatch):
    gate = mysql_gate
    write_unlabelled_tickets(tmp_path / "tickets.csv")
    write_labels(tmp_path / "labels.csv", 30)
    config = tmp_path / "gate.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "datasets": {"tickets": {"source": "tickets.csv"}, "reply-labels": {"source": "labels.csv"}},
                "prompts": {
                    "reply-judge": [{"dataset": "reply-labels", "min_accuracy": 0.9}],
                    "reply": [{"dataset": "tickets", "min_accuracy": 0.5}],
                    "classifier": [{"dataset": "tickets", "min_accuracy": 0.5}],
                },
            }
        )
    )
    planned = gateconfig.diff(gate, config)  # `sync --dry-run`: refused the file before
    assert "dataset tickets: new, source" in " ".join(planned.lines())
    gateconfig.sync(gate, config)
    fields = gate.dataset_version("tickets").fields
    assert fields["unlabelled"] is True and fields["counts"]["ticket"] == 12
    preview = CliRunner().invoke(cli, ["--database-url", gate.settings.database_url, "dataset", "preview", "tickets"])
    assert preview.output.startswith("tickets: 12 rows, labels none (no label column: a dataset for judged prompts)")

    with pytest.raises(RuleMisfit, match="dataset tickets gives no label .* only a judged prompt's dataset"):
        gate.submit(spec("classifier", labels=("good", "bad"), content="{{ item.ticket }}"), "apply")
    misnamed = tmp_path / "misnamed.csv"  # a label column under another name is not "no labels"
    misnamed.write_text("item_id,label,ticket\nt1,good,refund please\n")
    with pytest.raises(DatasetError, match="no label column 'expected_decision' .* this one has 'label'"):
        gate.register_dataset("misnamed", str(misnamed))

    with MockLLMServer(latency_ms=1) as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        (judge,) = run_until_terminal(gate, [gate.submit(judge_spec(), "apply")], timeout=60)
        assert judge.status == "APPLIED", judge.update.reason
        (live,) = run_until_terminal(gate, [gate.submit(reply_spec(), "apply")], timeout=60)
        assert live.status == "APPLIED", live.update.reason
        (weak,) = run_until_terminal(gate, [gate.submit(reply_spec(WEAK_REPLIES), "apply")], timeout=60)
    assert weak.status == "REJECTED"
    text, markdown = render_text(weak), render_report_markdown(weak)
    assert "broken t0: live said good, candidate said bad" in text, text
    assert "expected ," not in text and "expected n/a" not in text
    assert "expected ＼ actual" not in markdown  # no confusion matrix of labels nobody gave
