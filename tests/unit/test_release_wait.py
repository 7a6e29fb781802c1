"""What a release wait answers for (gate/contract/release.py): the rule both
``Gate.wait_for_sha`` and ``RemoteGate.wait_for_sha`` apply. A check never stands in for an
apply, in either direction: a passing check after a rejected apply, or a failing check
after an applied one, does not change what `wait --sha` says."""

from __future__ import annotations

import datetime as dt

import pytest

from gate.contract.release import Announcer, no_update, of_mode, release_updates
from gate.errors import UsageError
from gate.records import Update


def update(id_, mode, status, prompt="p1") -> Update:
    return Update(id_, prompt, mode, status, {}, "h", 0, {}, None, dt.datetime(2026, 1, 1), None, None)


def test_a_later_check_never_stands_in_for_an_apply():
    rejected_then_passing = [update(1, "apply", "REJECTED"), update(2, "check", "PASSED")]
    assert release_updates(rejected_then_passing) == ("apply", [rejected_then_passing[0]])
    applied_then_failing = [update(1, "apply", "APPLIED"), update(2, "check", "REJECTED")]
    assert release_updates(applied_then_failing) == ("apply", [applied_then_failing[0]])
    assert release_updates(rejected_then_passing, "check") == ("check", [rejected_then_passing[1]])


def test_auto_answers_for_checks_only_when_the_commit_has_no_apply():
    checks = [update(1, "check", "REJECTED"), update(2, "check", "PASSED"), update(3, "check", "PASSED", "p2")]
    assert release_updates(checks, "auto") == ("check", checks[1:])
    assert release_updates(checks, "apply") == ("apply", [])  # apply: waits for one to appear
    assert release_updates(checks) == ("apply", [])  # ... and is the default
    assert release_updates([], "auto") == (None, [])
    mixed = checks + [update(4, "apply", "APPLIED", "p2")]
    assert release_updates(mixed, "auto") == ("apply", [mixed[3]])  # p1 has only checks: not answered for
    assert of_mode(mixed, "auto") == ("apply", [mixed[3]])


def test_modes_and_messages():
    with pytest.raises(UsageError):
        release_updates([], "latest")
    assert "no apply-mode update was submitted for commit abc" in str(no_update("abc", None, "apply"))
    assert "no update was submitted for commit abc for prompt p1" in str(no_update("abc", "p1", "auto"))
    said = []
    announce = Announcer("a" * 40, "auto", said.append)
    for chosen in (None, "check", "check", "apply", "apply"):
        announce(chosen)
    assert said == [
        "commit aaaaaaaaaaaa: waiting for its check-mode updates (it has no apply-mode update; "
        "`--mode apply` waits for one)",
        "commit aaaaaaaaaaaa: waiting for its apply-mode updates",
    ]
