"""The progress `promptgate wait` shows on stderr (gate.cli.progress), on made-up reports
and a fake clock: redrawn in place on a terminal, rate-limited plain lines elsewhere, and
an ETA from the scoring rate seen while waiting."""

from __future__ import annotations

import datetime as dt
import io
import re
from decimal import Decimal

from gate.cli.progress import ScoringRate, WaitProgress, format_eta
from gate.records import Update
from gate.report.update import RunReport, UpdateReport

CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # anything but the newline


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def run(run_id=1, dataset="urgency-hard", total=500, scored=0, matches=0, errors=0, status="RUNNING"):
    return RunReport(
        run_id=run_id,
        dataset=dataset,
        bar=Decimal("0.8"),
        status=status,
        total=total,
        scored=scored,
        matches=matches,
        errors=errors,
        pending=total - scored - errors,
        accuracy=matches / scored if scored else None,
        passed=None,
        reason=None,
        row_count=total,
        content_hash=None,
        source_version=None,
        source_uri="file:///d.csv",
        metrics=None,
    )


def report(*runs, status="RUNNING", prompt="ticket-urgency"):
    update = Update(
        id=7,
        prompt_name=prompt,
        mode="check",
        status=status,
        candidate_config={},
        candidate_hash="h",
        base_version=0,
        source={},
        reason=None,
        created_at=dt.datetime(2024, 1, 1),
        started_at=None,
        finished_at=None,
    )
    return UpdateReport(update, list(runs), {})


def printer(is_tty, **kw):
    stream, clock = io.StringIO(), FakeClock()
    return WaitProgress(stream, is_tty, clock=clock, **kw), stream, clock


def test_eta_from_the_rate_seen_while_waiting():
    progress, stream, clock = printer(True)
    progress(report(run(scored=100, matches=90)))  # 100 done before waiting began: not a rate
    assert "100/500 scored  accuracy so far 90.0%  ETA --" in stream.getvalue()
    clock.now += 10
    progress(report(run(scored=150, matches=135)))  # 50 items in 10 s: 350 left → 70 s
    assert "150/500 scored  accuracy so far 90.0%  ETA 1:10" in stream.getvalue().rsplit("\x1b[", 1)[-1]
    clock.now += 5
    progress(report(run(scored=250, matches=200, errors=10)))  # 160 in 15 s; 240 left → 22.5 s → 0:23
    assert "260/500 done (250 scored, 10 errors)  accuracy so far 80.0%  ETA 0:23" in stream.getvalue()


def test_the_rate_moves_with_a_window():
    rate = ScoringRate(window=30)
    rate.add(0, 0)
    rate.add(10, 100)  # 10 per second
    assert rate.eta(100) == 10
    for t in range(20, 80, 10):  # then stalled
        rate.add(t, 100)
    assert rate.per_second() is None and rate.eta(100) is None  # no progress over the window: no guess
    rate.add(80, 160)  # 60 items since the last sample 30 s back
    assert rate.per_second() == 2
    rate.add(90, 50)  # fewer done than before: started over
    assert rate.per_second() is None
    idle = ScoringRate(window=30)
    for t in (0, 5, 10):  # nothing scored yet: materializing, another dataset
        idle.add(t, 40)
    idle.add(11, 60)  # the rate starts when the count moves
    assert idle.per_second() == 20 and idle.eta(40) == 2
    assert [format_eta(s) for s in (None, 0, 12, 12.1, 725, 3723)] == ["--", "0:00", "0:12", "0:13", "12:05", "1:02:03"]


def test_terminal_redraws_the_block_in_place():
    progress, stream, clock = printer(True, width=80)
    progress(report(run(1, "urgency-hard", 500), run(2, "easy", 0, status="PENDING"), status="PENDING"))
    first = stream.getvalue()
    assert first == (
        "\r\x1b[J"
        "update 7 ticket-urgency: PENDING\n"
        "  urgency-hard  0/500 scored  accuracy so far --  ETA --\n"
        "  easy          preparing items\n"
    )
    clock.now += 2
    progress(
        report(
            run(1, "urgency-hard", 500, scored=312, matches=263),
            run(2, "easy", 200, scored=200, matches=199, status="DONE"),
        )
    )
    redraw = stream.getvalue()[len(first) :]
    assert redraw.startswith("\x1b[3A\r\x1b[J")  # up over the 3 lines drawn, cleared, drawn again
    assert "  urgency-hard  312/500 scored  accuracy so far 84.3%  ETA 0:02\n" in redraw
    assert "  easy          200/200 scored  accuracy 99.5%  done\n" in redraw
    assert "update 7 ticket-urgency: RUNNING\n" in redraw
    progress.finish(report(run(1, "urgency-hard", 500, scored=500, matches=420, status="DONE"), status="PASSED"))
    last = stream.getvalue().rsplit("\x1b[3A", 1)[-1]  # the block had 3 lines: 2 now, the rest cleared
    assert last == "\r\x1b[Jupdate 7 ticket-urgency: PASSED\n  urgency-hard  500/500 scored  accuracy 84.0%  done\n"


def test_terminal_lines_fit_the_width_and_names_are_inert():
    progress, stream, _ = printer(True, width=40)
    hostile = "evil\x1b]0;owned\x07\x1b[2J\nname" + "x" * 80
    progress(report(run(1, hostile, 500, scored=1, matches=1), prompt="p\x1b[31m"))
    drawn = stream.getvalue().removeprefix("\r\x1b[J")
    assert "\x1b" not in drawn and "\x07" not in drawn and drawn.count("\n") == 2
    assert all(len(line) <= 39 for line in drawn.splitlines())


def test_plain_lines_when_not_a_terminal_at_most_one_per_dataset_every_10_s():
    progress, stream, clock = printer(False)
    progress(report(run(1, "hard", 500), run(2, "easy", 0), status="PENDING"))
    assert stream.getvalue() == (
        "update 7 ticket-urgency: PENDING\n"
        "update 7 hard: 0/500 scored, accuracy so far --, ETA --\n"
        "update 7 easy: preparing items\n"
    )
    mark = len(stream.getvalue())
    for step in range(1, 10):  # every second for 9 s: the figures change each time
        clock.now += 1
        progress(report(run(1, "hard", 500, scored=10 * step, matches=9 * step), run(2, "easy", 0)))
    assert stream.getvalue()[mark:] == "update 7 ticket-urgency: RUNNING\n"  # status changes print at once
    clock.now += 1  # 10 s since hard's last line: one line for it;
    progress(report(run(1, "hard", 500, scored=100, matches=90), run(2, "easy", 0)))
    clock.now += 20  # easy's figures never changed: no repeat
    progress(report(run(1, "hard", 500, scored=100, matches=90), run(2, "easy", 0)))
    assert stream.getvalue()[mark:].splitlines()[1:] == [
        "update 7 hard: 100/500 scored, accuracy so far 90.0%, ETA 0:40"
    ]
    mark = len(stream.getvalue())
    clock.now += 1  # the end: final figures at once, within 10 s
    progress.finish(
        report(
            run(1, "hard", 500, scored=500, matches=450, status="DONE"),
            run(2, "easy", 0, status="DONE"),
            status="PASSED",
        )
    )
    assert stream.getvalue()[mark:].splitlines() == [
        "update 7 ticket-urgency: PASSED",
        "update 7 hard: 500/500 scored, accuracy 90.0%, done",
        "update 7 easy: 0/0 scored, accuracy --, done",
    ]
    assert not CONTROL.search(stream.getvalue())


def test_plain_lines_are_inert_in_a_ci_log():
    progress, stream, _ = printer(False)
    progress(report(run(1, "::add-mask::x\r\n::warning::hi\x1b[2J"), prompt="##[error]p"))
    text = stream.getvalue()
    assert not CONTROL.search(text) and text.count("\n") == 2
    assert "::add-mask::" not in text and "::warning::" not in text and "##[error]" not in text


def test_nothing_is_shown_for_an_update_over_before_the_first_poll():
    for is_tty in (True, False):
        progress, stream, _ = printer(is_tty)
        progress.finish(report(run(status="DONE", scored=500, matches=500), status="PASSED"))
        assert stream.getvalue() == ""
