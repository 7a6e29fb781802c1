"""Progress of ``promptgate wait`` on stderr, so stdout (the report, ``--json``) stays as
it is: per dataset the items scored / total, the accuracy so far and an ETA.

``WaitProgress`` is the ``on_poll`` callback of ``Gate.wait`` (and of the HTTP client's
wait): it depends only on the ``UpdateReport`` it is handed at each poll.

* On a terminal the block (the update's status, then one line per dataset) is redrawn in
  place: the cursor goes back up over the previous block, which is cleared.
* Elsewhere (a CI log) it prints plain lines without control characters: the update's
  status when it changes, and a dataset's line when its figures changed, at most one per
  dataset every ``plain_every`` seconds so a long run does not flood the log; ``finish``
  prints the final figures whatever the interval.

The ETA divides the items left by the scoring rate seen over the last ``window`` seconds
of polls since waiting began ("ETA --" until items have been scored while we watched); a
dataset's rate starts when its count first moves, so time spent before its items were
scored (materializing, the workers busy on another dataset) does not slow its estimate.
Dataset and prompt names pass through ``terminal_safe`` (``workflow_safe`` in plain
lines, which CI runners read for commands).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from gate.untrusted import terminal_safe, workflow_safe

if TYPE_CHECKING:  # (the reports' dataclasses: loaded by whoever hands one over)
    from gate.report.update import RunReport, UpdateReport

PLAIN_EVERY = 10.0  # seconds between two plain lines of one dataset
RATE_WINDOW = 30.0  # seconds of polls the scoring rate is measured over
NAME_WIDTH = 32  # dataset names are padded to the longest, up to this
CURSOR_UP = "\x1b[{}A"
CLEAR_BELOW = "\r\x1b[J"
OPEN_RUN = ("PENDING", "RUNNING")


class ScoringRate:
    """Items done per second over a moving window of (time, items done) samples."""

    def __init__(self, window: float = RATE_WINDOW):
        self.window = window
        self.samples: deque[tuple[float, int]] = deque()

    def add(self, now: float, done: int) -> None:
        if self.samples and done < self.samples[-1][1]:
            self.samples.clear()  # fewer items done than before (retried errors): start over
        if len(self.samples) == 1 and self.samples[0][1] == done:
            self.samples.clear()  # not started yet (materializing, another dataset first): no idle time
        self.samples.append((now, done))
        while len(self.samples) > 2 and self.samples[1][0] <= now - self.window:
            self.samples.popleft()  # keep one sample at or before the window's start

    def per_second(self) -> float | None:
        if len(self.samples) < 2:
            return None
        (t0, d0), (t1, d1) = self.samples[0], self.samples[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 and d1 > d0 else None

    def eta(self, remaining: int) -> float | None:
        rate = self.per_second()
        return None if rate is None else remaining / rate


def format_eta(seconds: float | None) -> str:
    """``0:12``, ``12:05``, ``1:02:03``; ``--`` when unknown."""
    if seconds is None:
        return "--"
    minutes, secs = divmod(math.ceil(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def items_done(run: RunReport) -> int:
    """Items with an answer's verdict or a final error (as the text report counts them)."""
    return run.scored + run.errors


class WaitProgress:
    """Draws each report handed to it (``progress(report)``); ``finish(report)`` draws the
    final one. ``clock`` is a monotonic clock in seconds; ``width`` the terminal's columns
    (lines are cut to fit, or the redraw would miscount wrapped lines)."""

    def __init__(
        self,
        stream: TextIO,
        is_tty: bool,
        clock: Callable[[], float] = time.monotonic,
        width: int | None = None,
        plain_every: float = PLAIN_EVERY,
        window: float = RATE_WINDOW,
    ):
        self.stream, self.is_tty, self.clock = stream, is_tty, clock
        self.width = width if width and width > 1 else None
        self.plain_every, self.window = plain_every, window
        self.safe = terminal_safe if is_tty else workflow_safe
        self.rates: dict[int, ScoringRate] = {}
        self.printed: dict[int, tuple[tuple, float]] = {}  # run id -> (figures, when) of its last plain line
        self.printed_status: str | None = None
        self.drawn = 0  # lines of the block last drawn on the terminal
        self.polls = 0

    @classmethod
    def on_stderr(cls) -> WaitProgress:
        stream = sys.stderr
        is_tty = stream.isatty()
        return cls(stream, is_tty, width=terminal_width(stream) if is_tty else None)

    def __call__(self, report: UpdateReport) -> None:
        now = self.clock()
        self.polls += 1
        for run in report.runs:
            self.rates.setdefault(run.run_id, ScoringRate(self.window)).add(now, items_done(run))
        self.draw(report, now, final=False)

    def finish(self, report: UpdateReport | None = None) -> None:
        """Draws the final report (plain lines: whatever changed, at once) when progress was
        shown: an update already over when waiting began has only its report."""
        if report is None or not self.polls:
            return
        if self.is_tty:
            self(report)
        else:
            self.draw(report, self.clock(), final=True)

    def draw(self, report: UpdateReport, now: float, final: bool) -> None:
        if self.is_tty:
            self.redraw(self.block(report))
        else:
            self.print_plain(report, now, final)
        self.stream.flush()

    # --- on a terminal

    def block(self, report: UpdateReport) -> list[str]:
        u = report.update
        names = [self.safe(r.dataset, NAME_WIDTH) for r in report.runs]
        pad = min(NAME_WIDTH, max(map(len, names), default=0))
        lines = [f"update {u.id} {self.safe(u.prompt_name)}: {u.status}"]
        lines += [f"  {name:<{pad}}  {self.figures(run, '  ')}" for name, run in zip(names, report.runs)]
        return [line[: self.width - 1] if self.width else line for line in lines]

    def redraw(self, lines: list[str]) -> None:
        """Back up over the previous block (the cursor sits at the start of the line below
        it), clear to the end of the screen and write the new one."""
        self.stream.write(
            (CURSOR_UP.format(self.drawn) if self.drawn else "") + CLEAR_BELOW + "".join(line + "\n" for line in lines)
        )
        self.drawn = len(lines)

    # --- plain lines

    def print_plain(self, report: UpdateReport, now: float, final: bool) -> None:
        u = report.update
        if u.status != self.printed_status:
            self.stream.write(f"update {u.id} {self.safe(u.prompt_name)}: {u.status}\n")
            self.printed_status = u.status
        for run in report.runs:
            figures = (run.status, run.total, run.scored, run.matches, run.errors)
            last = self.printed.get(run.run_id)
            if last is not None and (last[0] == figures or (not final and now - last[1] < self.plain_every)):
                continue
            self.stream.write(f"update {u.id} {self.safe(run.dataset)}: {self.figures(run, ', ')}\n")
            self.printed[run.run_id] = (figures, now)

    # --- the figures of a run

    def figures(self, run: RunReport, sep: str) -> str:
        if run.total == 0 and run.status in OPEN_RUN:
            return "preparing items"
        done = items_done(run)
        parts = [
            f"{done}/{run.total} done ({run.scored} scored, {run.errors} errors)"
            if run.errors  # JSON's scored
            else f"{done}/{run.total} scored"
        ]
        accuracy = "--" if run.accuracy is None else f"{100 * run.accuracy:.1f}%"
        if run.status in OPEN_RUN:
            parts += [f"accuracy so far {accuracy}", f"ETA {format_eta(self.eta(run, done))}"]
        else:
            parts += [f"accuracy {accuracy}", run.status.lower()]
        if run.stop:  # stopped before every item was called: say so, and how many were not
            parts.append(f"stopped, {run.stopped} not scored")
        return sep.join(parts)

    def eta(self, run: RunReport, done: int) -> float | None:
        """Seconds until every item is scored (0 once they are: finalize is left)."""
        if done >= run.total or run.stop:
            return 0.0
        rate = self.rates.get(run.run_id)
        return rate.eta(run.total - done) if rate else None


def terminal_width(stream: TextIO) -> int | None:
    try:
        return os.get_terminal_size(stream.fileno()).columns or None
    except (OSError, ValueError, AttributeError):
        return None
