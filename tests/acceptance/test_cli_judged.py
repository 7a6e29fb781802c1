"""The real `promptgate` CLI with a judged prompt (gate/prompt/judge.py): the mapping's judged
bars from the command line, and a judged submission refused in one line when its judge has
no live version."""

from __future__ import annotations

import yaml
from support.cli import run_cli
from support.judging import GOOD_REPLIES, write_tickets


def test_judged_bars_on_the_command_line_and_a_judge_that_is_not_live(sqlite_url, tmp_path):
    tickets = write_tickets(tmp_path / "tickets.csv", 4)
    assert run_cli("--database-url", sqlite_url, "dataset", "add", "tickets", "--source", str(tickets)).returncode == 0
    mapped = run_cli(
        "--database-url",
        sqlite_url,
        "dataset",
        "map",
        "reply",
        "tickets",
        "--min-accuracy",
        "0.8",
        "--judge-corrected",
        "--max-loss-rate",
        "0.1",
        "--max-inconsistent",
        "0.2",
        "--sentinels",
        "10",
    )
    assert mapped.returncode == 0, mapped.stderr
    assert (
        "bars the judge-corrected pass rate, losses vs live ≤ 10%, 10 sentinels, position-inconsistent ≤ 20%"
        in mapped.stdout
    )
    refused = run_cli(
        "--database-url",
        sqlite_url,
        "dataset",
        "map",
        "reply",
        "tickets",
        "--min-accuracy",
        "0.8",
        "--sentinels",
        "500",
    )
    assert refused.returncode == 2 and "sentinels 500 is out of range" in refused.stderr
    odd = run_cli(
        "--database-url",
        sqlite_url,
        "dataset",
        "map",
        "reply",
        "tickets",
        "--min-accuracy",
        "0.8",
        "--max-inconsistent",
        "1.5",
    )
    assert (
        odd.returncode == 2 and odd.stderr.count("\n") == 1 and "max_inconsistent '1.5' is outside [0, 1]" in odd.stderr
    )
    prompt = tmp_path / "reply.yaml"
    prompt.write_text(
        yaml.safe_dump(
            {
                "name": "reply",
                "model": "mock-1",
                "messages": [
                    {"role": "system", "content": GOOD_REPLIES},
                    {"role": "user", "content": "{{ item.ticket }}"},
                ],
                "decision": {"type": "judge", "judge": "reply-judge", "pass": ["good"]},
            }
        )
    )
    submitted = run_cli("--database-url", sqlite_url, "submit", str(prompt))
    assert submitted.returncode == 2 and submitted.stdout == ""
    assert submitted.stderr.strip().splitlines()[-1].startswith("error: judge reply-judge has no live version")


def test_judge_floors_on_the_command_line_and_below_their_hard_minimums(sqlite_url, tmp_path):
    """Issue 46.2: `dataset map --min-judge-j/--min-judge-kappa/--min-judge-items` set a
    mapping's judge floors; one below its hard minimum is refused in one line, no traceback."""
    tickets = write_tickets(tmp_path / "tickets.csv", 4)
    assert run_cli("--database-url", sqlite_url, "dataset", "add", "tickets", "--source", str(tickets)).returncode == 0
    base = ("--database-url", sqlite_url, "dataset", "map", "reply", "tickets", "--min-accuracy", "0.8")
    mapped = run_cli(*base, "--min-judge-j", "0.6", "--min-judge-kappa", "0.5", "--min-judge-items", "40")
    assert mapped.returncode == 0, mapped.stderr
    assert "judge floors J ≥ 0.6, κ ≥ 0.5, 40 items" in mapped.stdout
    for option, value, said in (
        ("--min-judge-j", "0.1", "min_judge_j '0.1' is below the hard minimum 0.2"),
        ("--min-judge-kappa", "0.05", "min_judge_kappa '0.05' is below the hard minimum 0.2"),
        ("--min-judge-items", "10", "min_judge_items '10' is below the hard minimum 20"),
    ):
        refused = run_cli(*base, option, value)
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
