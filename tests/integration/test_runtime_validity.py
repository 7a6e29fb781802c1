"""Issue 46.8: the runtime returned ``valid=True`` for an answer off the prompt's strict
schema, its decision ``{"(schema)": "'total' is a required property", ...}``: production could
not tell without parsing for a magic key. Now an answer off the schema, with no label or not
an object is ``valid=False`` with its reason typed on the result (``invalid``), and the
decision carries no marker; the gate's own scoring keeps its marks."""

from __future__ import annotations

import json

from sqlalchemy import select
from support.helpers import rules_spec, write_rule_rows

from gate.mockllm import MockLLMServer
from gate.prompt.spec import parse_spec
from gate.runtime import Invalid, InvalidKind, PromptRuntime
from gate.states import Verdict
from gate.store import schema
from workers.supervisor import run_until_terminal

EXTRACT = """Extract the order id and the total of an order email, as JSON.
- extract order_id: /ORD-[0-9]+/
- extract total: /([0-9]+[.][0-9]{2}) EUR/ as number
"""
SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "total": {"type": "number"}},
    "required": ["order_id", "total"],
    "additionalProperties": False,
}


def extract_spec():
    return parse_spec(
        {
            "name": "orders",
            "model": "mock-1",
            "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": SCHEMA, "strict": True}},
            "decision": {"type": "fields", "fields": {"order_id": "exact", "total": "number"}},
            "messages": [{"role": "system", "content": EXTRACT}, {"role": "user", "content": "{{ item.email }}"}],
        }
    )


def test_an_answer_off_the_strict_schema_is_invalid_with_the_schemas_message(gate, tmp_path, monkeypatch):
    rows = [
        {
            "item_id": f"o{i}",
            "email": f"Order ORD-{i}: {10 + i}.50 EUR",
            "expected": {"order_id": f"ORD-{i}", "total": 10 + i + 0.5},
        }
        for i in range(6)
    ]
    rows.append(
        {
            "item_id": "o-late",
            "email": "Order ORD-99, total to follow",
            "expected": {"order_id": "ORD-99", "total": 1.0},
        }
    )
    (tmp_path / "orders.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    gate.register_dataset("orders", str(tmp_path / "orders.jsonl"))
    gate.map_dataset("orders", "orders", "0.5")
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        (applied,) = run_until_terminal(gate, [gate.submit(extract_spec(), "apply", full=True)], timeout=60)
        assert applied.status == "APPLIED", applied.update.reason
        handle = PromptRuntime(gate.settings.database_url, ttl=0, report=False).prompt("orders")
        good = handle.decide({"email": "Order ORD-7: 12.50 EUR"})
        assert good.valid and good.invalid is None
        assert json.loads(good.decision) == {"order_id": "ORD-7", "total": 12.5}
        off = handle.decide({"email": "Order ORD-8, total to follow"})  # the model leaves the total out
    # the gate's own scoring keeps its mark: the run's off-schema answer is stored with it, a MISMATCH
    (run,) = applied.runs
    item = schema.prompt_run_item
    with gate.engine.connect() as conn:
        stored = conn.execute(
            select(item.c.actual_decision, item.c.verdict).where(
                item.c.run_id == run.run_id, item.c.item_id == "o-late"
            )
        ).one()
    assert json.loads(stored.actual_decision) == {"(schema)": "'total' is a required property", "order_id": "ORD-99"}
    assert stored.verdict == Verdict.MISMATCH
    assert not off.valid
    assert off.invalid == Invalid(InvalidKind.SCHEMA, "'total' is a required property")
    assert "(schema)" not in off.decision and json.loads(off.decision) == {"order_id": "ORD-8"}
    assert "invalid=Invalid(kind=<InvalidKind.SCHEMA: 'schema'>, message=\"'total' is a required property\")" in repr(
        off
    )


def test_a_label_prompt_answered_with_no_label_is_invalid(gate, tmp_path, monkeypatch):
    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 6)))
    gate.map_dataset("p1", "d", "0.5")
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        (applied,) = run_until_terminal(gate, [gate.submit(rules_spec("p1"), "apply")], timeout=60)
        assert applied.status == "APPLIED", applied.update.reason
        handle = PromptRuntime(gate.settings.database_url, ttl=0, report=False).prompt("p1")
        good = handle.decide({"text": "alpha here"})
    assert (good.valid, good.invalid, good.decision) == (True, None, "yes")
    with MockLLMServer(garbage_rate=1.0) as garbage:  # answers a word outside the labels
        monkeypatch.setenv("OPENAI_BASE_URL", garbage.base_url)
        handle = PromptRuntime(gate.settings.database_url, ttl=0, report=False).prompt("p1")
        bad = handle.decide({"text": "alpha here"})
    assert not bad.valid and bad.invalid is not None and bad.invalid.kind is InvalidKind.NO_LABEL
    assert bad.decision == "(invalid)"
