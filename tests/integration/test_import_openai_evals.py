"""Issue 50.2: OpenAI eval files become datasets and prompts the gate syncs and evaluates (on
MariaDB, against the local model server): an exported hosted eval (its item schema, its
graders — string_check as checks, label_model as a judge skeleton, the others listed — and
its ``{"item": ...}`` JSONL, with a run's input messages as the prompt), and the
openai/evals registry's samples (``input`` messages, ``ideal``)."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select
from support import judged_env

from gate.gateconfig import sync
from gate.imports.openai_evals import import_openai_evals
from gate.prompt.spec import load_spec
from gate.states import Verdict
from gate.store.schema import prompt_run_item
from workers.supervisor import run_until_terminal

llm = judged_env.llm  # a shared fixture

RULES = (
    "Draft a reply.\n- reply when charged: We are sorry about order {{ item.order_id }}: a refund has been issued.\n"
    "- reply otherwise: You can reset your password from the sign-in page."
)
EXPORT = {
    "object": "eval",
    "id": "eval_abc",
    "name": "Support replies",
    "data_source_config": {
        "type": "custom",
        "item_schema": {"type": "object", "properties": {"ticket": {"type": "string"}, "order_id": {"type": "string"}}},
        "include_sample_schema": True,
    },
    "testing_criteria": [
        {
            "type": "string_check",
            "name": "mentions order",
            "input": "{{ sample.output_text }}",
            "reference": "{{ item.order_id }}",
            "operation": "like",
        },
        {
            "type": "string_check",
            "name": "mentions refund",
            "input": "{{ sample.output_text }}",
            "reference": "refund",
            "operation": "ilike",
        },
        {
            "type": "label_model",
            "name": "polite",
            "model": "gpt-4o-mini",
            "input": [{"role": "user", "content": "Is this polite? {{ sample.output_text }}"}],
            "labels": ["polite", "rude"],
            "passing_labels": ["polite"],
        },
        {"type": "text_similarity", "name": "close", "input": "{{ sample.output_text }}", "reference": "x"},
        {"type": "python", "name": "code", "source": "def grade(sample, item): return 1"},
    ],
    "runs": [
        {
            "data_source": {
                "type": "completions",
                "model": "mock-1",
                "input_messages": {
                    "type": "template",
                    "template": [
                        {"role": "system", "content": RULES},
                        {"role": "user", "content": "{{ item.ticket }}"},
                    ],
                },
            }
        }
    ],
}
ITEMS = [
    {"ticket": "I was charged twice", "order_id": "ORD-1"},  # names the order, promises a refund
    {"ticket": "password please", "order_id": "ORD-2"},  # neither
]
SAMPLES = [
    {
        "input": [
            {"role": "system", "content": "One word.\n- urgent: outage\n- routine: password"},
            {"role": "user", "content": c},
        ],
        "ideal": i,
    }
    for c, i in (
        ("the site is down, outage", "urgent"),
        ("reset my password", "routine"),
        ("outage again", ["routine", "low"]),
    )
]


def evaluated(gate, folder: Path) -> dict[str, str]:
    sync(gate, folder / "gate.yaml")
    updates = [gate.submit(load_spec(p)) for p in sorted((folder / "prompts").glob("*.yaml"))]
    runs = [r.runs[0].run_id for r in run_until_terminal(gate, updates, timeout=120)]
    i = prompt_run_item
    with gate.engine.connect() as conn:
        return dict(conn.execute(select(i.c.item_id, i.c.verdict).where(i.c.run_id.in_(runs))).all())


def test_a_hosted_eval_export_and_registry_samples_are_evaluated_by_the_gate(mysql_gate, llm, tmp_path):
    export, data = tmp_path / "eval.json", tmp_path / "items.jsonl"
    export.write_text(json.dumps(EXPORT))
    data.write_text("".join(json.dumps({"item": item}) + "\n" for item in ITEMS))
    bundle = import_openai_evals(export, data)
    bundle.write(tmp_path / "hosted")
    checks = bundle.prompts["support-replies"]["decision"]["checks"]
    assert checks == {
        "mentions_order": {"contains": {"column": "order_id"}},
        "mentions_refund": {"icontains": "refund"},
    }
    assert [s.what for s in bundle.skipped] == ["label_model → judges/polite-judge.yaml", "text_similarity", "python"]
    assert (tmp_path / "hosted" / "judges" / "polite-judge.yaml").exists()
    verdicts = evaluated(mysql_gate, tmp_path / "hosted")
    assert verdicts == {"item-1": Verdict.MATCH, "item-2": Verdict.MISMATCH}

    samples = tmp_path / "urgency.jsonl"
    samples.write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    registry = import_openai_evals(samples)
    registry.write(tmp_path / "registry")
    assert registry.prompts["urgency"]["messages"][1] == {"role": "user", "content": "{{ item.user_2 }}"}
    assert [s.line() for s in registry.skipped] == ["line 3: 1 more ideal(s): the check reads the first ideal"]
    verdicts = evaluated(mysql_gate, tmp_path / "registry")
    assert verdicts == {"sample-1": Verdict.MATCH, "sample-2": Verdict.MATCH, "sample-3": Verdict.MISMATCH}
