"""A generative answer compared with live's by a judge (``decision: {type: judge, judge:
<name>, compare: live}``): the judge reads both answers, in both orders; a win is the
candidate's, a loss live's, and the run's wins and losses are its flips against live."""

from __future__ import annotations

from .judged import JudgedKind


class ComparedKind(JudgedKind):
    name = "compared"

    def judge_calls(self, trials: int) -> int:
        return trials * 2  # both orders


COMPARED = ComparedKind()
