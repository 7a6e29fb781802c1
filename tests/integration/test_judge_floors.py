"""Issue 46.2, "a judge must be able to tell", on MariaDB with real worker processes and the
local model server: a judge decides only when its agreement with the humans clears floors
(Youden's J, Cohen's κ, human items; gate/verdict/judge_floors.py). A judge that says
"good" to everything (sensitivity 1, specificity 0, κ 0) is REJECTED at its own gate,
naming the figure; one already live from before the floors is named by `sync --dry-run`
and a prompt naming it is refused at submit with its figures (it used to APPLY a drafter at
100 % ✅ on min_accuracy 0.5); the floors are a mapping's to raise or lower, never below
their hard minimums."""

from __future__ import annotations

import pytest
from support import judged_env
from support.cli import run_cli
from support.judging import WEAK_REPLIES, judge_spec, live_judge, reply_spec, write_labels, write_tickets

from gate import gateconfig
from gate.errors import NotFound, UsageError
from gate.states import UpdateStatus
from workers.supervisor import run_until_terminal

llm = judged_env.llm  # a shared fixture
workers = judged_env.workers  # a shared fixture

LENIENT = "Judge the support reply.\n- judge pass good: refund*\n- judge otherwise: good"  # good to everything
SAID_J = "Youden's J 0.00 (sensitivity 1.00, specificity 0.00) < 0.5"


def in_process(gate):
    return lambda update_id: run_until_terminal(gate, [update_id], timeout=60)[0]


def live_before_the_floors(gate, tmp_path, monkeypatch, spec):
    """A judge made live as the gate did before the floors existed: its own gate held to its
    bars only (the floors' check left out for this one apply, in this process)."""
    with monkeypatch.context() as m:
        m.setattr("gate.verdict.update_outcome._judge_below_floors", lambda runs: [], raising=False)
        live_judge(gate, tmp_path, in_process(gate), bar="0.5", spec=spec)


def test_a_judge_that_says_good_to_everything_cannot_go_live_as_a_judge(mysql_gate, llm, workers, tmp_path):
    """It agrees with the humans on the 100 good replies of 200, so it clears min_accuracy
    0.5; its own gate is REJECTED for its Youden's J, with sensitivity and specificity."""
    gate = mysql_gate
    gate.register_dataset("reply-labels", str(write_labels(tmp_path / "labels.csv", 200)))
    gate.map_dataset("reply-judge", "reply-labels", "0.5")
    update_id = gate.submit(judge_spec(rules=LENIENT), "apply")
    workers(gate, llm)
    report = gate.wait(update_id, timeout=90)
    assert report.status == UpdateStatus.REJECTED, report.update.reason
    assert report.update.reason == f"missed: the judge cannot tell: {SAID_J}"
    with pytest.raises(NotFound):
        gate.live("reply-judge")


def test_a_weak_judge_goes_live_only_under_floors_its_mapping_lowers(mysql_gate, llm, workers, tmp_path):
    """A judge that agrees on 130 of 200 (sensitivity = specificity = 0.65: J 0.30, κ 0.30)
    is rejected under the default floors, applied under floors its mapping lowers to the
    hard minimums, and a candidate whose own mapping keeps the defaults is refused at
    submit; one whose mapping lowers them too is staged."""
    gate = mysql_gate
    gate.register_dataset("reply-labels", str(write_labels(tmp_path / "labels.csv", 200, disagree=70)))
    gate.map_dataset("reply-judge", "reply-labels", "0.6")
    update_id = gate.submit(judge_spec(), "apply")
    workers(gate, llm)
    report = gate.wait(update_id, timeout=90)
    assert report.status == UpdateStatus.REJECTED, report.update.reason
    assert report.update.reason == (
        "missed: the judge cannot tell: Youden's J 0.30 (sensitivity 0.65, specificity 0.65) < 0.5"
    )
    low = {"min_judge_j": "0.2", "min_judge_kappa": "0.2"}
    gate.map_dataset("reply-judge", "reply-labels", "0.6", bars=low)
    assert gate.wait(gate.submit(judge_spec(), "apply"), timeout=90).status == UpdateStatus.APPLIED
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 30)))
    gate.map_dataset("reply", "tickets", "0.5")
    with pytest.raises(UsageError) as err:
        gate.submit(reply_spec())
    assert str(err.value) == (
        "judge reply-judge v1 cannot tell well enough to decide reply × tickets: Youden's J 0.30 (sensitivity "
        "0.65, specificity 0.65) < 0.5 (its figures: Youden's J 0.30 (sensitivity 0.65, specificity 0.65), "
        "Cohen's κ 0.30, 200 human items); give it a better prompt or more human-labelled items and apply it again"
    )
    gate.map_dataset("reply", "tickets", "0.5", bars=low)
    assert gate.submit(reply_spec()) > 0


def test_too_few_human_items_keep_a_judge_from_going_live(mysql_gate, llm, workers, tmp_path):
    """A judge that agrees on every one of 24 human items stands on too few of them."""
    gate = mysql_gate
    gate.register_dataset("reply-labels", str(write_labels(tmp_path / "labels.csv", 24)))
    gate.map_dataset("reply-judge", "reply-labels", "0.9")
    update_id = gate.submit(judge_spec(), "apply")
    workers(gate, llm)
    report = gate.wait(update_id, timeout=90)
    assert report.status == UpdateStatus.REJECTED, report.update.reason
    assert report.update.reason == "missed: the judge cannot tell: 24 human items < 30"


def test_a_prompt_naming_a_judge_live_below_the_floors_is_refused_at_submit(
    mysql_gate, llm, workers, tmp_path, monkeypatch
):
    """The issue's case: a judge that says good to everything, live from before the floors.
    A drafter judged by it on min_accuracy 0.5 was APPLIED at 100 % ✅; now its submit is
    refused in one line with the judge's figures (J, κ, n) and the floor that failed."""
    gate = mysql_gate
    live_before_the_floors(gate, tmp_path, monkeypatch, judge_spec(rules=LENIENT))
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 30)))
    gate.map_dataset("reply", "tickets", "0.5")
    with pytest.raises(UsageError) as err:
        update_id = gate.submit(reply_spec(WEAK_REPLIES), "apply")
        workers(gate, llm)
        report = gate.wait(update_id, timeout=90)
        pytest.fail(f"staged and ended {report.status}: {report.update.reason}")
    said = str(err.value)
    assert "\n" not in said and said.startswith("judge reply-judge v1 cannot tell well enough to decide reply")
    assert f": {SAID_J} (its figures:" in said and "Cohen's κ 0.00, 200 human items" in said
    assert [u.prompt_name for u in gate.list_updates()] == ["reply-judge"]  # nothing staged for reply


def test_sync_dry_run_names_a_judge_live_below_the_floors_in_one_line(
    mysql_gate, mysql_url, llm, tmp_path, monkeypatch
):
    gate = mysql_gate
    live_before_the_floors(gate, tmp_path, monkeypatch, judge_spec(rules=LENIENT))
    write_tickets(tmp_path / "tickets.csv", 30)
    config = tmp_path / "gate.yaml"
    config.write_text(
        f"datasets:\n  tickets: {{source: {tmp_path / 'tickets.csv'}}}\n"
        f"  reply-labels: {{source: {tmp_path / 'labels.csv'}}}\n"
        "prompts:\n  reply:\n    - {dataset: tickets, min_accuracy: 0.5}\n"
        "  reply-judge:\n    - {dataset: reply-labels, min_accuracy: 0.5}\n"
    )
    warned = [c for c in gateconfig.diff(gate, config).changes if c.kind == "judge-below-floors"]
    assert [str(c) for c in warned] == [
        f"judge reply-judge: warning: live v1 is below the floors of its own gate (reply-judge × reply-labels): "
        f"{SAID_J}; every prompt it judges is refused at submit until it is applied again above them "
        "(CHANGELOG: judge floors)"
    ]
    shown = run_cli("sync", str(config), "--dry-run", "--database-url", mysql_url)
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if "judge reply-judge" in line]
    assert len(lines) == 1 and SAID_J in lines[0], shown.stdout
