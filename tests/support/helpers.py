"""Small builders shared by the tests."""

from __future__ import annotations

import csv
from pathlib import Path

from gate.prompt.spec import parse_spec


def spec(name="p1", labels=("yes", "no"), content="Answer yes or no: {{ item.text }}", **extra):
    return parse_spec(
        {
            "name": name,
            "model": "mock-1",
            "labels": list(labels),
            "messages": [{"role": "user", "content": content}],
            **extra,
        }
    )


def write_csv(path: Path, n: int, label=lambda i: "yes" if i % 2 else "no", start: int = 0) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "text"])
        for i in range(start, start + n):
            w.writerow([f"i{i}", label(i), f"item number {i}"])
    return path


def setup_gate(gate, tmp_path, name="p1", datasets=(("d1", 10, "0.5"),)):
    """Register datasets of n rows each and map them to prompt ``name``."""
    for ds, n, bar in datasets:
        gate.register_dataset(ds, str(write_csv(tmp_path / f"{ds}.csv", n)))
        gate.map_dataset(name, ds, bar)


RULES = "Classify the message.\n- yes: alpha\n- no: beta\ndefault: no"


def rules_spec(name="p1", description=""):
    """A prompt the local model server answers by its rules: 'alpha' → yes, 'beta' → no."""
    return parse_spec(
        {
            "name": name,
            "model": "mock-1",
            "description": description,
            "messages": [{"role": "system", "content": RULES}, {"role": "user", "content": "{{ item.text }}"}],
        }
    )


def write_rule_rows(path: Path, n: int, wrong_every: int = 0) -> Path:
    """n rows the rules answer correctly, except every ``wrong_every``-th (a MISMATCH)."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "text"])
        for i in range(n):
            right = "yes" if i % 2 else "no"
            wrong = "no" if right == "yes" else "yes"
            expected = wrong if wrong_every and i % wrong_every == 0 else right
            w.writerow([f"i{i}", expected, f"{'alpha' if right == 'yes' else 'beta'} message {i}"])
    return path


def old_request_key(spec_, messages, base_url) -> str:
    """The reuse key's formula before trials existed (gate/prompt/request_keys.py at 297a3e8): a prompt
    with one trial must keep it, or the answers kept before would never be reused."""
    import hashlib
    import json

    from gate.prompt.request_keys import CALL_PATH_VERSION, decision_rule
    from gate.prompt.spec import request_kwargs

    canonical = json.dumps(
        {
            "call_path": CALL_PATH_VERSION,
            "endpoint": base_url or "default",
            "request": request_kwargs(spec_, list(messages)),
            "decision": decision_rule(spec_),
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()
    return hashlib.sha256(canonical).hexdigest()
