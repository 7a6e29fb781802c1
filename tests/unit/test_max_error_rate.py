"""The error budget (issue 38): ``max_error_rate`` per mapping — parsed from untrusted config,
compared exactly at its edges, errors counted apart (never as matches), the accuracy bar
computed on the items scored and said so. 0, the default: one error fails the update."""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace

import pytest

from gate.errors import UsageError
from gate.records.pinned import Pinned
from gate.states import RunStatus, UpdateStatus
from gate.verdict.bar_checks import check
from gate.verdict.bars import Bars
from gate.verdict.scoring import run_end
from gate.verdict.update_outcome import update_end


def test_max_error_rate_is_a_fraction_below_1_and_0_by_default():
    assert Bars.parse("0.9").max_error_rate == 0
    assert Bars.parse("0.9", {"max_error_rate": 0}).extra() is None  # the default is not pinned as a bar
    bars = Bars.parse("0.9", {"max_error_rate": "0.1"})
    assert bars.max_error_rate == Decimal("0.1") and bars.extra() == {"max_error_rate": "0.1"}
    assert Bars.parse("0.9", bars.extra()) == bars
    assert bars.describe() == ["at most 10% of items unscorable"]
    for bad, words in (
        ("1", "below 1"),
        ("0.999999999", None),
        ("10", r"outside \[0, 1\]"),
        ("-0.1", r"outside \[0, 1\]"),
        ("a tenth", "not a number"),
        ("0.0000000001", "9 decimal places"),
    ):
        if words is None:
            assert Bars.parse("0.9", {"max_error_rate": bad}).max_error_rate == Decimal(bad)
            continue
        with pytest.raises(UsageError, match=words):
            Bars.parse("0.9", {"max_error_rate": bad})


def metrics(errors: int, total: int = 100, matches: int | None = None) -> dict:
    scored = total - errors
    return {"total": total, "scored": scored, "matches": scored if matches is None else matches, "errors": errors}


@pytest.mark.parametrize(
    ("rate", "errors", "total", "status"),
    [
        ("0", 0, 100, RunStatus.DONE),
        ("0", 1, 100, RunStatus.ERROR),  # the default: one permanent error fails the run
        ("0.1", 10, 100, RunStatus.DONE),  # at the budget: within
        ("0.1", 11, 100, RunStatus.ERROR),  # one more: over
        ("0.333333333", 1, 3, RunStatus.ERROR),  # 1/3 is more than 0.333333333, compared exactly
        ("0.333333334", 1, 3, RunStatus.DONE),
    ],
)
def test_errors_within_the_budget_leave_the_run_done_one_more_ends_it_error(rate, errors, total, status):
    kinds = {"server": errors} if errors else None
    got, reason = run_end(metrics(errors, total), "d", kinds, max_error_rate=Decimal(rate))
    assert got == status
    if status == RunStatus.ERROR:
        assert reason.startswith(f"{errors} of {total} items of d could not be scored (server: {errors}")
        assert ("more than its max_error_rate" in reason) == (rate != "0")


def test_a_template_over_its_budget_fails_the_run_whatever_the_error_budget():
    status, _ = run_end(metrics(1), "d", {"budget": 1}, max_error_rate=Decimal("0.5"))
    assert status == RunStatus.ERROR


def test_errors_are_counted_apart_and_the_bar_is_computed_on_what_was_scored():
    """18 of 20 answered, all right, 2 unscorable: 100 % of the 18 scored clears a 100 % bar;
    the errors are never matches, and the check of the budget says how many and of which
    kinds, not which."""
    bars = Bars.parse("1", {"max_error_rate": "0.1"})
    checks = {c.name: c for c in check(bars, {**metrics(2, 20), "error_kinds": {"bad_request": 2}})}
    accuracy, budget = checks["min_accuracy"], checks["max_error_rate"]
    assert (accuracy.value, accuracy.state) == ("100.0%", "pass")
    assert accuracy.note == "of the 18 items scored; 2 could not be scored"
    assert (budget.limit, budget.value, budget.state) == ("10%", "10.0%", "pass")
    assert budget.note == "2 of 20 items could not be scored (bad_request: 2); see the failing items"
    assert check(Bars.parse("1"), metrics(0, 20))[0].note is None  # no error: nothing said


def test_the_update_clears_on_the_items_scored_and_says_so():
    run = SimpleNamespace(
        status=RunStatus.DONE,
        dataset_name="d",
        metrics={**metrics(2, 20), "error_kinds": {"server": 2}},
        min_accuracy=Decimal("0.9"),
        pinned=Pinned.of({"bars": {"max_error_rate": "0.1"}}),
        reason=None,
    )
    status, reason = update_end("apply", [run])
    assert status == UpdateStatus.APPLIED
    assert reason == "every bar cleared (d 100.0% ≥ 90% of the 18 items scored; 2 could not be scored)"
