"""YAML 1.2 scalars end to end (MariaDB and SQLite): a prompt file's `labels: [yes, no]`,
a gate config whose datasets and prompt are named `no`, `off` and `yes`, and dataset rows
labelled "yes" and "no" in CSV and JSONL all mean the words they show. Under YAML 1.1 they
were booleans: the labels became true/false, no row's label matched, and a config keyed
by them named no dataset."""

from __future__ import annotations

import json

from gate import gateconfig
from gate.mockllm import MockLLMServer
from gate.prompt.spec import load_spec
from gate.states import UpdateStatus
from workers.supervisor import run_until_terminal

PROMPT = """name: yes
model: mock-1
labels: [yes, no]
messages:
  - role: system
    content: "Classify the message.\\n- yes: alpha\\n- no: beta\\ndefault: no"
  - {role: user, content: "{{ item.text }}"}
"""

GATE_CONFIG = """datasets:
  no: {source: rows.csv}
  off: {source: rows.jsonl}
prompts:
  yes:
    - {dataset: no, min_accuracy: 1}
    - {dataset: off, min_accuracy: 1}
"""


def test_yes_and_no_are_words_in_prompts_gate_configs_and_datasets(gate, tmp_path, monkeypatch):
    (tmp_path / "prompt.yaml").write_text(PROMPT)
    (tmp_path / "gate.yaml").write_text(GATE_CONFIG)
    (tmp_path / "rows.csv").write_text("item_id,expected_decision,text\n1,yes,alpha one\n2,no,beta two\n")
    (tmp_path / "rows.jsonl").write_text(
        json.dumps({"item_id": "1", "expected_decision": "yes", "text": "alpha"})
        + "\n"
        + json.dumps({"item_id": "2", "expected_decision": "no", "text": "beta"})
        + "\n"
    )
    spec = load_spec(tmp_path / "prompt.yaml")
    assert (spec.name, spec.labels) == ("yes", ("yes", "no"))
    gateconfig.sync(gate, tmp_path / "gate.yaml")
    assert sorted((m.prompt_name, m.dataset_name) for m in gate.mappings()) == [("yes", "no"), ("yes", "off")]
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        (report,) = run_until_terminal(gate, [gate.submit(spec, "apply")], timeout=60)
    assert report.status == UpdateStatus.APPLIED, report.update.reason
    assert sorted((r.dataset, r.matches, r.scored) for r in report.runs) == [("no", 2, 2), ("off", 2, 2)]
    assert gate.live("yes").config["labels"] == ["yes", "no"]
