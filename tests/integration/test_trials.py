"""Trials on MariaDB with real workers (in-process roles) and the local model server: each
rule gives the verdict it promises on items whose answers per trial are scripted; with a
model that answers a share of items at random the unstable items are listed and every
figure counts items, not calls; each trial is a distinct answer kept for reuse (no call on
an identical resubmission, every trial called with reuse off, a one-trial prompt keeps the
key it always had; on SQLite too); retention keeps an item's trials together; a trial
that fails retryably retries the item up to the cap; hostile trial fields are refused in
one line by the real CLI."""

from __future__ import annotations

import csv

import pytest
from jsonschema import Draft202012Validator
from sqlalchemy import select
from support.cli import run_cli
from support.helpers import RULES, old_request_key, rules_spec, write_rule_rows
from test_reuse import evaluate

from gate.calls.providers import default_endpoint
from gate.contract.codec import decode, encode
from gate.mockllm import MockLLMServer
from gate.mockllm.variance import is_flaky_item
from gate.prompt.spec import parse_spec
from gate.report.markdown import render_report_markdown
from gate.report.text import render_text
from gate.report.update import UpdateReport
from gate.schemas import status_schema
from gate.store.schema import answer, prompt_run_item
from gate.verdict.stats import wilson_interval
from workers.supervisor import run_until_terminal

SCRIPTS = {"a": "yes,yes,yes", "b": "yes,yes,no", "c": "no,yes,no", "d": "no,no,no"}  # all expect yes


def trial_spec(name: str, model: str = "mock-1", **trials):
    return parse_spec(
        {
            "name": name,
            "model": model,
            "messages": [{"role": "system", "content": RULES}, {"role": "user", "content": "{{ item.text }}"}],
            **trials,
        }
    )


def write_scripted(path):
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "text"])
        for item_id, script in SCRIPTS.items():
            w.writerow([item_id, "yes", f"item {item_id}\nanswers: {script}"])
    return path


RULE_CASES = {  # prompt -> (its trial fields, the items that MATCH)
    "p-majority": ({"trials": 3}, {"a", "b"}),
    "p-all": ({"trials": 3, "trial_rule": "all"}, {"a"}),
    "p-k2": ({"trials": 3, "trial_rule": "k_of_n", "k": 2}, {"a", "b"}),
    "p-k3": ({"trials": 3, "trial_rule": "k_of_n", "k": 3}, {"a"}),
}


def test_each_rule_gives_the_verdict_it_promises_and_lists_the_unstable_items(mysql_gate, tmp_path, monkeypatch):
    mysql_gate.register_dataset("d", str(write_scripted(tmp_path / "d.csv")))
    for name in RULE_CASES:
        mysql_gate.map_dataset(name, "d", "0.25")
    # a model name each: the server counts identical requests, so prompts must not share them
    ids = [mysql_gate.submit(trial_spec(name, f"mock-{name}", **fields)) for name, (fields, _) in RULE_CASES.items()]
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        reports = run_until_terminal(mysql_gate, ids, timeout=60)
        assert llm.stats()["requests"] == len(RULE_CASES) * len(SCRIPTS) * 3
    schema = Draft202012Validator(status_schema())
    for (name, (_fields, matching)), report in zip(RULE_CASES.items(), reports):
        run = report.runs[0]
        assert report.terminal and run.status == "DONE", (name, report.update.reason)
        failing = {f.item_id for f in run.failures}
        assert set(SCRIPTS) - failing == matching, name
        assert (run.matches, run.scored, run.total) == (len(matching), 4, 4), name  # n = items
        assert {f.item_id: f.actual_decision for f in run.failures}.get("b") in (None, "no")
        assert [(u.item_id, sorted(u.answers)) for u in run.unstable] == [
            ("b", ["no", "yes", "yes"]),
            ("c", ["no", "no", "yes"]),
        ], name
        assert run.trials["unstable"] == 2 and run.trials["n"] == 3 and run.calls["calls"] == 12
        assert list(schema.iter_errors(report.to_dict())) == [], name
    majority = reports[0]
    assert decode(UpdateReport, encode(majority)) == majority  # the service's wire form
    text = render_text(majority)
    assert "trials: 3 calls per item, majority (2 of 3 must match); 2 unstable items" in text
    assert "unstable c: expected yes, trials no, yes, no → MISMATCH" in text  # trial order: one thread calls them
    assert "calls: 12 (3 per item)" in text
    markdown = render_report_markdown(majority)
    assert "**Unstable items** — the trials disagree (2)" in markdown and "| b | yes | MATCH |" in markdown


def test_a_flaky_model_lists_unstable_items_and_every_figure_counts_items(mysql_gate, tmp_path, monkeypatch):
    rows = 24
    path = write_rule_rows(tmp_path / "d.csv", rows)
    mysql_gate.register_dataset("d", str(path))
    mysql_gate.map_dataset("p1", "d", "0.1")
    texts = {r["item_id"]: r["text"] for r in csv.DictReader(path.open())}
    flaky = {i for i, text in texts.items() if is_flaky_item(text, 50)}
    assert 3 <= len(flaky) <= rows - 3
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        live, _ = evaluate(mysql_gate, rules_spec("p1"), llm, mode="apply")  # every item right
        assert live.status == "APPLIED"
        report, calls = evaluate(mysql_gate, trial_spec("p1", "mock-flaky-50", trials=3), llm)
    run = report.runs[0]
    assert calls == 3 * rows and run.calls["calls"] == 3 * rows
    assert (run.scored, run.total) == (rows, rows)
    assert run.trials["unstable"] >= 1 and {u.item_id for u in run.unstable} <= flaky  # the others never waver
    assert all(len(u.answers) == 3 and len(set(u.answers)) > 1 for u in run.unstable)
    c = run.comparison
    assert c["paired"] == rows and c["fixed"] == 0 and c["broken"] == rows - run.matches  # live was all right
    assert c["interval"] == list(wilson_interval(run.matches, rows))  # n = items, not calls
    assert c["live_interval"] == list(wilson_interval(rows, rows))
    assert f"{run.trials['unstable']} unstable item" in render_text(report)
    # the status page shows them too, escaped
    from gate.service import pages, views

    html = pages.page("update.html.j2", None, v=views.update_view(report), samples=5).body.decode()
    assert f"<strong>{run.trials['unstable']}</strong> unstable item" in html and "Unstable items" in html
    assert all(u.item_id in html for u in run.unstable)


def test_each_trial_is_a_distinct_answer_kept_for_reuse(gate, tmp_path, monkeypatch):
    """On MariaDB and SQLite."""
    rows = 10
    path = write_rule_rows(tmp_path / "d.csv", rows)
    gate.register_dataset("d", str(path))
    gate.map_dataset("p1", "d", "0.5")
    texts = [r["text"] for r in csv.DictReader(path.open())]
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        one = trial_spec("p1")
        _, calls = evaluate(gate, one, llm)
        assert calls == rows
        base = default_endpoint().base_url
        expected = {
            old_request_key(one, [{"role": "system", "content": RULES}, {"role": "user", "content": t}], base)
            for t in texts
        }
        assert kept_keys(gate) == expected  # a one-trial answer is kept under the key it always had

        three = trial_spec("p1", trials=3)
        report, calls = evaluate(gate, three, llm)
        assert calls == 2 * rows and report.runs[0].calls["reused"] == rows  # trial 1 is the one-call answer
        assert len(kept_keys(gate)) == 3 * rows  # every trial under its own key

        report, calls = evaluate(gate, three, llm, mode="apply")  # an identical resubmission
        assert calls == 0 and report.status == "APPLIED" and report.runs[0].calls["reused"] == 3 * rows
        _, calls = evaluate(gate, three, llm, reuse=False)  # --no-reuse: every trial
        assert calls == 3 * rows

        gate.prune(older_than=0)  # trials 2..3 were paid for by another update than the live one
        _, calls = evaluate(gate, three, llm)
        assert calls == 0  # retention kept them with trial 1 (trial_of)


def test_a_trial_that_fails_retryably_retries_the_item_until_the_cap(mysql_gate, tmp_path, monkeypatch):
    """A 500 on one trial makes the item PENDING again (all its trials are called anew);
    only at the attempt cap does a failed trial stay, as an ERROR trial that does not match."""
    rows = 16
    mysql_gate.settings = mysql_gate.settings.with_(backoff_base=0.01, backoff_max=0.05)
    mysql_gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", rows)))
    mysql_gate.map_dataset("p1", "d", "0.1")
    with MockLLMServer(error_rate=0.3, seed=7) as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        report, calls = evaluate(mysql_gate, trial_spec("p1", trials=3), llm)
    cap = mysql_gate.settings.attempt_cap
    with mysql_gate.engine.connect() as conn:
        items = conn.execute(
            select(prompt_run_item.c.verdict, prompt_run_item.c.attempt, prompt_run_item.c.trials).where(
                prompt_run_item.c.run_id == report.runs[0].run_id
            )
        ).all()
    assert report.attempts["retried_items"] > 0 and calls > 3 * rows
    for verdict, attempt, trials in items:
        failed = [t for t in trials if t.get("error")]
        assert len(trials) == 3 and (not failed or attempt == cap), (verdict, attempt, trials)
        assert (verdict == "ERROR") == (len(failed) == 3)
        if not failed:
            assert verdict == "MATCH"  # the rules answer every row right


def kept_keys(gate) -> set[str]:
    with gate.engine.connect() as conn:
        return set(conn.execute(select(answer.c.request_key)).scalars())


@pytest.mark.parametrize(
    "line, field",
    [
        ("trials: 10000", "trials"),
        ("trials: -1", "trials"),
        ("trial_rule: bogus", "trial_rule"),
        ("trials: 3\ntrial_rule: k_of_n\nk: 5", "k"),
    ],
)
def test_hostile_trial_fields_are_refused_by_the_cli_in_one_line(tmp_path, line, field):
    path = tmp_path / "p.yaml"
    path.write_text(f"name: p1\nmodel: m\n{line}\nmessages:\n  - {{role: user, content: '{{{{ item.text }}}}'}}\n")
    result = run_cli("submit", path, "--database-url", f"sqlite:///{tmp_path / 'g.db'}")
    assert result.returncode == 2 and "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: {field}: "), result.stderr
