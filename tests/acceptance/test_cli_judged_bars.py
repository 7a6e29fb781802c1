"""Issue 46.4 from the real `promptgate` CLI on MariaDB: a bar the prompt's kind cannot compute
(``DecisionKind.bars_computable``) is refused by `dataset map` in one line naming the bar and
the kind, and nothing is mapped."""

from __future__ import annotations

import yaml
from support.cli import run_cli
from support.judging import write_tickets


def test_dataset_map_refuses_a_bar_the_prompts_kind_cannot_compute(mysql_url, tmp_path):
    db = ("--database-url", mysql_url)
    assert run_cli(*db, "db", "upgrade").returncode == 0
    tickets = write_tickets(tmp_path / "tickets.csv", 4)
    assert run_cli(*db, "dataset", "add", "tickets", "--source", str(tickets)).returncode == 0
    assert run_cli(*db, "dataset", "map", "kind", "tickets", "--min-accuracy", "0.5").returncode == 0
    prompt = tmp_path / "kind.yaml"
    prompt.write_text(
        yaml.safe_dump(
            {
                "name": "kind",
                "model": "mock-1",
                "labels": ["good", "bad"],
                "messages": [
                    {"role": "system", "content": "default: good"},
                    {"role": "user", "content": "{{ item.ticket }}"},
                ],
            }
        )
    )
    submitted = run_cli(*db, "submit", str(prompt))
    assert submitted.returncode == 0, submitted.stderr  # the gate knows its kind now: a label prompt
    refused = run_cli(*db, "dataset", "map", "kind", "tickets", "--min-accuracy", "0.5", "--max-loss-rate", "0.1")
    assert refused.returncode == 2, refused.stdout
    assert refused.stderr.count("\n") == 1 and refused.stderr.rstrip("\n").endswith(
        "kind × tickets: bar max_loss_rate cannot be computed for a label prompt (decided by one label): "
        "drop it from the mapping"
    ), refused.stderr
    listed = run_cli(*db, "dataset", "list")
    assert "loss" not in listed.stdout  # the mapping kept its bars
