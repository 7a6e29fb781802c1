"""A compared prompt's first-version judge in the prompt file (``decision.first``, issue 46.1)
and the kind its first version's runs are pinned as (gate/kinds/first.py)."""

from __future__ import annotations

import json

import jsonschema
import pytest
from support.cli import ROOT

from gate.errors import SpecError
from gate.kinds import kind_of
from gate.kinds.compared import COMPARED
from gate.kinds.first import FIRST, FIRST_NOTE
from gate.kinds.judged import JUDGED
from gate.prompt.request_keys import decision_rule
from gate.prompt.spec import parse_spec
from gate.verdict.bars import Bars

SCHEMA = json.loads((ROOT / "gate" / "schemas" / "prompt.schema.json").read_text())


def spec(**decision):
    return {
        "name": "reply",
        "model": "m",
        "messages": [{"role": "user", "content": "{{ item.ticket }}"}],
        "decision": {"type": "judge", "judge": "pair-judge", "compare": "live", **decision},
    }


def test_first_names_a_graded_judge_and_is_kept_in_the_config():
    data = spec(first={"judge": "reply-judge", "pass": ["good"], "judge_trials": 3})
    jsonschema.validate(data, SCHEMA)
    parsed = parse_spec(data)
    assert parsed.to_config()["decision"] == data["decision"]
    assert kind_of(parsed.decision) is COMPARED
    graded = COMPARED.first_version(parsed.decision)
    assert graded is not None and kind_of(graded) is FIRST
    assert graded.to_dict() == {
        "type": "judge",
        "judge": "reply-judge",
        "pass": ["good"],
        "judge_trials": 3,
        "first_version": True,
    }
    # the answer is kept under the same key whoever judges it: the first version's answers are reused
    assert FIRST.keyed_rule(graded.to_dict()) == COMPARED.keyed_rule(decision_rule(parsed)) == {"type": "judge"}
    assert COMPARED.first_version(parse_spec(spec()).decision) is None
    assert JUDGED.first_version(parse_spec(spec()).decision) is None


@pytest.mark.parametrize(
    ("decision", "where"),
    [
        ({"first": "reply-judge"}, "decision.first: must be a mapping"),
        ({"first": {"judge": "reply-judge"}}, "decision.first.pass: the first version's judge grades"),
        ({"first": {"judge": "reply-judge", "pass": []}}, "decision.first.pass: must list 1 to 64"),
        ({"first": {"judge": "reply-judge", "pass": ["good"], "compare": "live"}}, "decision.first.compare: unknown"),
        ({"first": {"judge": "reply-judge", "pass": ["good"], "judge_trials": 2}}, "decision.first.judge_trials"),
        ({"first": {"judge": "Bad Name", "pass": ["good"]}}, "decision.first.judge"),
        ({"first_version": True}, "decision.first_version: unknown field"),  # never from a file
    ],
)
def test_a_bad_first_is_refused_in_one_line(decision, where):
    with pytest.raises(SpecError) as err:
        parse_spec(spec(**decision))
    assert where in str(err.value) and "\n" not in str(err.value)


def test_only_a_compared_prompt_names_a_first_judge():
    data = spec(first={"judge": "reply-judge", "pass": ["good"]})
    del data["decision"]["compare"]
    data["decision"]["pass"] = ["good"]
    with pytest.raises(SpecError, match="decision.first: only a compared prompt"):
        parse_spec(data)


def test_a_stored_first_version_rule_is_the_first_kind():
    assert kind_of({"type": "judge", "judge": "j", "pass": ["good"], "first_version": True}) is FIRST
    assert kind_of({"type": "judge", "judge": "j", "pass": ["good"]}) is JUDGED
    assert kind_of({"type": "judge", "judge": "j", "compare": "live", "first_version": True}) is COMPARED


def test_the_first_versions_comparison_bars_are_not_applied():
    bars = Bars.parse("0.8", {"max_loss_rate": 0.05, "max_broken": 0})
    assert FIRST.judged_baseline(False, bars) == {"baseline": None, "baseline_note": FIRST_NOTE}  # no baseline_error
    metrics = {"scored": 10, "matches": 9, "judge": {"passed": 9, "scored": 10}}
    checks = {c.name: c for c in FIRST.checks(bars, metrics, [])}  # type: ignore[arg-type]
    assert checks["max_loss_rate"].state == "n/a" and checks["max_loss_rate"].note == FIRST_NOTE
    assert checks["max_inconsistent"].state == "n/a"  # shown, not dropped (the hostile review)


def _unseen(extra_bars=None, p95=None):
    """A compared run with no live version (nothing compared), as reconcile reads it."""
    from decimal import Decimal
    from types import SimpleNamespace

    from gate.records.pinned import Pinned

    pairwise = {"live": False, "wins": 0, "losses": 0, "ties": 0, "inconsistent": 0, "compared": 0}
    metrics = {"matches": 10, "scored": 10, "flips": None, "judge": {"passed": 10, "scored": 10, "pairwise": pairwise}}
    if p95 is not None:
        metrics["calls"] = {"latency_ms": {"p50": p95, "p95": p95, "max": p95}, "timed": 10}
    bars = {"max_loss_rate": "0.1", **(extra_bars or {})}
    return SimpleNamespace(
        status="DONE",
        dataset_name="d",
        metrics=metrics,
        min_accuracy=Decimal("0.8"),
        pinned=Pinned.of({"bars": bars}),
        reason=None,
    )


def test_an_accepted_update_is_applied_not_judged_and_its_other_bars_still_hold():
    from gate.contract.release import combine_exit_codes
    from gate.states import UpdateStatus
    from gate.verdict.update_outcome import update_end

    checks_of = lambda r: COMPARED.checks  # noqa: E731
    assert update_end("apply", [_unseen()], checks_of)[0] == UpdateStatus.FAILED  # not accepted: never applied
    status, reason = update_end("apply", [_unseen()], checks_of, accepted=True)
    assert status == UpdateStatus.APPLIED
    assert reason.startswith("not judged: accepted by an admin without a judge (d min_accuracy, max_loss_rate: no live")
    assert reason.endswith("; every other bar cleared")
    status, reason = update_end("apply", [_unseen({"max_latency_p95_ms": 100}, p95=900)], checks_of, accepted=True)
    assert status == UpdateStatus.REJECTED and "max_latency_p95_ms" in reason  # the bars a run computes still hold
    assert combine_exit_codes([0, 5]) == 5 and combine_exit_codes([5, 3]) == 3 and combine_exit_codes([5, 1]) == 1


def test_an_update_applied_not_judged_is_never_a_success_in_any_output():
    import datetime as dt

    from gate.action.outcome import commit_state, exit_code_for, overall_status
    from gate.records import Update
    from gate.report.markdown import render_markdown
    from gate.report.text import render_text
    from gate.report.update import UpdateReport

    def report(source):
        now = dt.datetime(2026, 12, 7)
        update = Update(7, "reply", "apply", "APPLIED", {}, "h", 0, source, "not judged: …", now, now, now)
        return UpdateReport(update, [], {})

    accepted = report({"accept_unjudged": True, "submitted_by": "release-bot"})
    assert (accepted.outcome, accepted.exit_code) == ("NOT_JUDGED", 5)
    assert accepted.outcome_sentence.startswith("applied, not judged: accepted by admin token release-bot")
    assert "APPLIED → NOT_JUDGED" in render_text(accepted) and "✅" not in render_text(accepted)
    comment = render_markdown([accepted])
    assert "## ☑️ prompt-gate: 1 applied, not judged" in comment and "✅" not in comment
    assert overall_status([accepted], []) == "not-judged" and exit_code_for([accepted], []) == 5
    assert commit_state([accepted], [], 60)[0] == "failure"
    judged = report({})
    assert (judged.outcome, judged.exit_code, overall_status([judged], [])) == ("APPLIED", 0, "applied")
