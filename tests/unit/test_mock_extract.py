"""The local model server's extraction rules (gate/mockllm/extract.py): what it answers a
prompt decided field by field."""

from __future__ import annotations

import json

from gate.mockllm.extract import extract

SYSTEM = """Read the email.
- extract order_id: /ORD-[0-9]+/
- extract amount: /([0-9]+[.][0-9]{2}) EUR/ as number
- extract category: billing = refund*, charged twice; shipping = parcel, delivery; other
- extract broken: /([a-/
"""


def answer(user: str, system: str = SYSTEM):
    out = extract([{"role": "system", "content": system}, {"role": "user", "content": user}])
    return None if out is None else json.loads(out)


def test_patterns_keywords_and_defaults():
    assert answer("Order ORD-12: I was charged twice, 40.00 EUR.") == {
        "order_id": "ORD-12",
        "amount": 40.0,
        "category": "billing",
    }
    assert answer("Refunded? ORD-7, 12 EUR") == {"order_id": "ORD-7", "category": "billing"}  # no amount: left out
    assert answer("My PARCEL is late") == {"category": "shipping"}
    assert answer("hello") == {"category": "other"}  # the part without "=" is the default


def test_no_extraction_rules_leaves_the_classification_rules_to_answer():
    assert answer("hello", "- yes: alpha\n- no: beta") is None
    assert answer("hello", "extract nothing here") is None
