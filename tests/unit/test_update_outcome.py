"""The verdict over every bar (gate/verdict/update_outcome.py): a bar n/a does not block; a failed live
baseline fails the update only when a bar needs it."""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace

from gate.records.pinned import Pinned
from gate.verdict.update_outcome import update_end


def run(bars=None, flips=None, baseline_error=None, matches=9, scored=10, confusion=None, calls=None):
    metrics = {
        "matches": matches,
        "scored": scored,
        "total": scored,
        "confusion": confusion or {},
        "flips": flips,
        "baseline_error": baseline_error,
        "calls": calls,
    }
    return SimpleNamespace(
        status="DONE",
        dataset_name="d",
        metrics=metrics,
        min_accuracy=Decimal("0.8"),
        pinned=Pinned.of({"bars": bars}),
        reason=None,
    )


def test_accuracy_alone_as_before():
    assert update_end("apply", [run()]) == ("APPLIED", "every bar cleared (d 90.0% ≥ 80%)")
    status, reason = update_end("check", [run(matches=7)])
    assert (status, reason) == ("REJECTED", "missed: d 70.0% < bar 80%")


def test_max_broken_fails_passes_or_is_not_applied():
    flips = {"fixed": 1, "broken": 2, "both_right": 7, "both_wrong": 0, "paired": 10}
    assert update_end("check", [run({"max_broken": 1}, flips)]) == ("REJECTED", "missed: d max_broken 2 > bar 1")
    assert update_end("check", [run({"max_broken": 2}, flips)])[0] == "PASSED"
    status, reason = update_end("apply", [run({"max_broken": 0})])  # no live answers: n/a
    assert status == "APPLIED" and reason.endswith("; nothing to measure for: items broken against live")


def test_a_failed_baseline_fails_the_update_only_when_a_bar_needs_it():
    why = "the live version could not be scored on this dataset version: 3 of 10 items could not be scored"
    assert update_end("check", [run(baseline_error=why)])[0] == "PASSED"
    status, reason = update_end("check", [run({"max_broken": 0}, baseline_error=why)])
    assert status == "FAILED" and reason == f"could not be scored: d: {why} (max_broken needs it)"


def test_per_label_and_latency_bars():
    confusion = {"yes": {"yes": 4, "no": 1}, "no": {"no": 4, "yes": 1}}
    assert update_end("check", [run({"min_recall": {"yes": "0.8"}}, confusion=confusion)])[0] == "PASSED"
    status, reason = update_end("check", [run({"min_recall": {"yes": "0.81"}}, confusion=confusion)])
    assert (status, reason) == ("REJECTED", "missed: d min_recall[yes] 80.0% < bar 81%")
    slow = {"latency_ms": {"p50": 100, "p95": 900, "max": 1000, "timed": 10}}
    status, reason = update_end("check", [run({"max_latency_p95_ms": 800}, calls=slow)])
    assert (status, reason) == ("REJECTED", "missed: d max_latency_p95_ms 900 ms > bar 800 ms")


def test_a_label_spelled_in_another_case_cannot_switch_a_per_label_bar_off():
    """Answers compare case-insensitively, so a prompt may write URGENT where the bar (and
    the dataset) say urgent: the bar still applies to it."""
    shouted = {"URGENT": {"URGENT": 3, "routine": 7}, "routine": {"routine": 10}}
    status, reason = update_end(
        "check", [run({"min_recall": {"urgent": "0.9"}}, confusion=shouted, matches=13, scored=20)]
    )
    assert (status, reason) == ("REJECTED", "missed: d 65.0% < bar 80%; d min_recall[urgent] 30.0% < bar 90%")


def test_a_cost_that_cannot_be_computed_fails_its_bar():
    r = run({"max_cost_per_1k_items": "1"})
    r.metrics.update(cost_usd=None, cost_note="3 of 10 answers came without token counts", total=10)
    assert update_end("check", [r]) == (
        "REJECTED",
        "missed: d max_cost_per_1k_items: 3 of 10 answers came without token counts",
    )
    r.metrics.update(cost_usd="0.0100", total=10)  # $1.00 per 1,000 items: at the bar, exactly
    assert update_end("check", [r])[0] == "PASSED"
    r.metrics.update(cost_usd="0.0100000001")
    assert update_end("check", [r])[0] == "REJECTED"


def test_a_precision_bar_on_a_label_never_answered_passes():
    confusion = {"yes": {"no": 2}, "no": {"no": 8}}
    assert update_end("check", [run({"min_precision": {"yes": "0.99"}}, confusion=confusion, matches=8)])[0] == "PASSED"


def test_a_bar_not_yet_compared_never_passes():
    r = run({"max_broken": 0})
    del r.metrics["flips"]  # reconcile has not paired the answers
    status, reason = update_end("check", [r])
    assert status == "REJECTED" and "max_broken" in reason


def test_max_drop_inconclusive_is_said_so_not_missed():
    one_point_worse = {"fixed": 6, "broken": 8, "both_right": 174, "both_wrong": 12, "paired": 200}
    status, reason = update_end("check", [run({"max_drop": "2"}, one_point_worse, matches=180, scored=200)])
    assert status == "REJECTED" and reason.startswith("inconclusive: d max_drop \u22121.0 pts [\u2212")
    assert "the difference could be as low as" in reason and "the limit is \u22122" in reason
    assert "missed" not in reason
    five_worse = {"fixed": 50, "broken": 300, "both_right": 4350, "both_wrong": 300, "paired": 5000}
    status, reason = update_end("check", [run({"max_drop": "2"}, five_worse, matches=4400, scored=5000)])
    assert status == "REJECTED" and reason.startswith("missed: d max_drop \u22125.0 pts")
    same_rates_more_items = {"fixed": 150, "broken": 200, "both_right": 4350, "both_wrong": 300, "paired": 5000}
    assert (
        update_end("check", [run({"max_drop": "2"}, same_rates_more_items, matches=4500, scored=5000)])[0] == "PASSED"
    )


def test_max_drop_needs_the_live_answers_like_max_broken():
    why = "the live version's answers are incomplete: 8 of 10 items paired with run 3"
    status, reason = update_end("check", [run({"max_drop": "2"}, baseline_error=why)])
    assert status == "FAILED" and reason == f"could not be scored: d: {why} (max_drop needs it)"


def _stopped(kind, **stop):
    r = run(matches=2, scored=20)
    r.metrics["stop"] = {"kind": kind, **stop}
    return r


def test_a_run_settled_early_rejects_its_update_and_its_sibling_is_not_judged():
    sentence = (
        "stopped after 20 of 1,000 items: even if every remaining item matched, accuracy would be at most "
        "78.2 % < 80 % — 980 calls saved"
    )
    settled = _stopped(
        "early_stop", missed=[{"bar": "min_accuracy"}], sentence=sentence, best={"matches": 782, "scored": 1000}
    )
    sibling = _stopped("with_update")
    sibling.dataset_name = "other"
    assert update_end("check", [sibling, settled]) == ("REJECTED", f"stopped early: d: {sentence}")
    from gate.verdict.update_outcome import run_checks

    assert run_checks(sibling) == []
    (accuracy,) = run_checks(settled)
    assert accuracy.state == "fail" and accuracy.value == "78.2%" and accuracy.note.startswith("stopped early")


def test_a_stop_the_final_figures_do_not_confirm_fails_rather_than_rejects():
    status, reason = update_end("check", [_stopped("early_stop", missed=[], sentence=None)])
    assert status == "FAILED" and "do not settle the verdict" in reason and "--full" in reason


def test_the_spend_cap_fails_the_update_with_its_figures():
    capped = _stopped("spend_cap", sentence="max_calls_per_update 300: 300 calls made; 700 of 1,000 items not called")
    assert update_end("check", [capped]) == (
        "FAILED",
        "spend cap reached: max_calls_per_update 300: 300 calls made; 700 of 1,000 items not called",
    )


def test_the_spend_line_never_calls_its_bound_a_most_that_retries_pass():
    """Review: ``calls_bound`` is items × trials, but an item whose call failed retryably
    is called again (up to the workers' attempt cap): with a flaky provider a report read
    "91 made, 0 reused (at most 60 model calls …)". The bound says it is before retries."""
    from gate.report.text import spend_line

    line = spend_line(
        {
            "calls_bound": 60,
            "max_calls_per_update": None,
            "max_cost_per_update_usd": None,
            "calls_made": 91,
            "calls_reused": 0,
            "calls_saved": 0,
            "cost_reserved_usd": None,
            "full": True,
        }
    )
    assert line == "91 made, 0 reused (60 model calls before retries; every item called (--full))"


def test_the_spend_line_says_the_calls_that_may_have_been_made_beyond_those_recorded():
    """Issue 38: reports said "5,000 made" while the model server saw 5,511; the claims lost
    with killed workers bound the rest, said as such (and, while the update is open, as in
    flight or lost)."""
    from gate.report.text import spend_line

    spend = {"calls_made": 5000, "calls_unrecorded": 511, "calls_reused": 0, "calls_saved": 0}
    assert (
        spend_line(spend) == "5,000 made (recorded); up to 511 more may have been made by workers that died, 0 reused"
    )
    assert spend_line(spend, terminal=False) == (
        "5,000 made (recorded); up to 511 more in flight or lost with a worker, 0 reused"
    )
    assert spend_line({**spend, "calls_unrecorded": 0}) == "5,000 made, 0 reused"


def test_a_run_that_could_not_be_scored_says_how_many_items_and_of_which_kinds():
    """Not which items nor what they said: the reason reaches any reader of the update, of a
    holdout too (issue 33); the first one's id and error went into it before."""
    from gate.verdict.scoring import run_end

    metrics = {"total": 20, "errors": 3}
    status, reason = run_end(metrics, "hold", {"template": 2, "timeout": 1})
    assert (status, reason) == (
        "ERROR",
        "3 of 20 items of hold could not be scored (template: 2, timeout: 1; see the failing items)",
    )
    broken = SimpleNamespace(status="ERROR", dataset_name="hold", metrics=metrics, reason=reason, pinned=Pinned())
    assert update_end("check", [broken]) == ("FAILED", f"could not be scored: hold: {reason}")
    budget = "budget: template exceeded its budget of 2 s of CPU, 64 MiB per item (out of CPU time)"
    _, reason = run_end(metrics, "hold", {"budget": 3}, budget=budget)
    assert reason.endswith(
        "(budget: 3; see the failing items): template exceeded its budget of 2 s of CPU, 64 MiB "
        "per item (out of CPU time)"
    )
