"""Judges: a generative prompt decided by another prompt, and that prompt's own format.

A prompt whose answer is text (a drafted reply, a summary) says
``decision: {type: judge, judge: NAME, pass: [labels]}``: each item's answer is graded by
the live version of the prompt ``NAME`` and the item is a MATCH when the judge's label is
one of ``pass``. With ``compare: live`` instead of ``pass`` the judge compares the
candidate's answer with the live version's on the same item, in both orders
(``gate.verdict.judge_stats``). ``judge_trials: N`` (odd) asks the judge N times and takes
the majority.

A judge is a prompt whose file says ``kind: judge``. Its templates may read, besides
``item``, the answer it grades: ``answer``, or ``answer_a`` and ``answer_b`` for a
comparison. In its own evaluation on its human-labelled dataset those come from the row's
columns of the same names; as a judge, from the answers it grades. Either way the value is
untrusted text (model output written under a pull request's prompt, or a dataset cell): it
reaches the template as a bounded string variable (``bounded_answer``: at most
``MAX_ANSWER_BYTES`` of UTF-8, control and bidi-override characters dropped as the report
drops them), never as template source, so nothing in it is evaluated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gate.errors import SpecError
from gate.untrusted import CONTROL, storable

from .call_settings import check_name
from .templating import PLAIN_ROOTS, names_read

KINDS = ("prompt", "judge")
ANSWER_NAMES = tuple(
    sorted(PLAIN_ROOTS - {"item"})
)  # what a judge's templates read besides item: answer, answer_a, answer_b
PAIR_NAMES = ("answer_a", "answer_b")
MAX_ANSWER_BYTES = 32 * 1024
MAX_PASS_LABELS = 64
MAX_JUDGE_TRIALS = 9
JUDGE_KEYS = ("type", "judge", "pass", "compare", "judge_trials", "first")
FIRST_KEYS = ("judge", "pass", "judge_trials")  # a compared prompt's first-version judge (``first:``)
PAIR_LABELS = ("a", "b")  # a comparing judge's labels for "the first answer" and "the second" (label_key)


@dataclass(frozen=True)
class JudgeRule:
    """How a generative prompt's answers are decided: by the live version of ``judge``,
    a pass when its label is one of ``passing`` (graded), or against live's answer
    (``compare == "live"``); ``trials`` calls of the judge per verdict, the majority's.

    A compared rule may name ``first``: the graded rule its prompt's first version is
    judged by, while the prompt has no live version to compare with (the prompt file's
    ``first: {judge, pass, judge_trials}``). Submit alone makes the rule a run pins for
    that first version (``graded_first``): ``first_version`` is never read from a file."""

    judge: str
    passing: tuple[str, ...] = ()
    compare: str | None = None
    trials: int = 1
    first: JudgeRule | None = None  # compared: the graded rule of the first version
    first_version: bool = False  # graded as a compared prompt's first version (set by submit only)

    @property
    def pairwise(self) -> bool:
        return self.compare is not None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"judge": self.judge}
        if self.compare is not None:
            out["compare"] = self.compare
        else:
            out["pass"] = list(self.passing)
        if self.trials != 1:
            out["judge_trials"] = self.trials
        if self.first is not None:
            out["first"] = self.first.to_dict()
        if self.first_version:
            out["first_version"] = True
        return out

    def graded_first(self) -> JudgeRule | None:
        """The rule a compared prompt's first version is graded by (its ``first``), marked
        as such; None when it names none."""
        if self.first is None:
            return None
        return JudgeRule(self.first.judge, self.first.passing, trials=self.first.trials, first_version=True)


def parse_kind(value: Any, file: str | None) -> str:
    if value is None:
        return "prompt"
    if value not in KINDS:
        raise SpecError(file, "kind", "must be prompt (the default) or judge (a prompt that grades answers)")
    return value


def parse_judge_rule(value: Mapping[str, Any], file: str | None) -> JudgeRule:
    """``decision: {type: judge, ...}``, every field bounded; one line per problem."""
    extra = [k for k in value if k not in JUDGE_KEYS]
    if extra:
        raise SpecError(
            file,
            f"decision.{str(extra[0])[:80]}",
            "unknown field; a judge decision has judge, pass or compare, judge_trials, first",
        )
    if value.get("judge") is None:  # `decision: judge` (a string) read as {type: judge} has no judge
        raise SpecError(
            file,
            "decision",
            "a judged decision is a mapping that names its judge: decision: {type: judge, judge: NAME, "
            "pass: [LABEL, ...]} (or compare: live instead of pass)",
        )
    judge = check_name(value.get("judge"), "decision.judge", file)
    if ("pass" in value) == ("compare" in value):
        raise SpecError(
            file,
            "decision.pass",
            "a judge decision has either pass (the judge's labels that count as a pass) or compare: live",
        )
    trials = _judge_trials(value.get("judge_trials", 1), file, "decision.judge_trials")
    if "compare" in value:
        if value["compare"] != "live":
            raise SpecError(file, "decision.compare", "must be live: the candidate is compared with the live version")
        first = _first_rule(value["first"], file) if "first" in value else None
        return JudgeRule(judge, compare="live", trials=trials, first=first)
    if "first" in value:
        raise SpecError(
            file, "decision.first", "only a compared prompt (compare: live) names a judge for its first version"
        )
    return JudgeRule(judge, _pass_labels(value["pass"], file, "decision.pass"), trials=trials)


def _first_rule(value: Any, file: str | None) -> JudgeRule:
    """``first: {judge: NAME, pass: [...], judge_trials: N}``: the graded judge of a compared
    prompt's first version, bounded as a decision's judge is."""
    if not isinstance(value, Mapping):
        raise SpecError(
            file, "decision.first", "must be a mapping: {judge: NAME, pass: [labels]}, the first version's judge"
        )
    extra = [k for k in value if k not in FIRST_KEYS]
    if extra:
        raise SpecError(
            file, f"decision.first.{str(extra[0])[:80]}", "unknown field; first has judge, pass, judge_trials"
        )
    judge = check_name(value.get("judge"), "decision.first.judge", file)
    if "pass" not in value:
        raise SpecError(file, "decision.first.pass", "the first version's judge grades: list its labels that pass")
    return JudgeRule(
        judge,
        _pass_labels(value["pass"], file, "decision.first.pass"),
        trials=_judge_trials(value.get("judge_trials", 1), file, "decision.first.judge_trials"),
    )


def _judge_trials(trials: Any, file: str | None, where: str) -> int:
    if (
        isinstance(trials, bool)
        or not isinstance(trials, int)
        or not 1 <= trials <= MAX_JUDGE_TRIALS
        or trials % 2 == 0
    ):
        raise SpecError(file, where, f"must be an odd whole number from 1 to {MAX_JUDGE_TRIALS} (a majority)")
    return trials


def _pass_labels(value: Any, file: str | None, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or len(value) > MAX_PASS_LABELS:
        raise SpecError(file, where, f"must list 1 to {MAX_PASS_LABELS} of the judge's labels")
    for label in value:
        if not isinstance(label, str) or not label.strip() or len(label) > 128 or CONTROL.search(label):
            raise SpecError(file, where, "each entry must be one of the judge's labels (at most 128 characters)")
    return tuple(value)


def bounded_answer(value: Any) -> str:
    """An answer as a judge's template sees it: text (a non-string dataset cell as its JSON
    text would be silly to evaluate, so as ``str``), control and bidi-override characters
    dropped, at most ``MAX_ANSWER_BYTES`` of UTF-8 (cut on a character boundary)."""
    text = value if isinstance(value, str) else "" if value is None else str(value)
    text = CONTROL.sub("", storable(text))
    if len(text) * 4 <= MAX_ANSWER_BYTES:
        return text
    return text.encode()[:MAX_ANSWER_BYTES].decode(errors="ignore")


def answer_variables(names: Iterable[str], item: Mapping[str, Any]) -> dict[str, str]:
    """A judge's own evaluation: the answers its templates read (``names``), from the row's
    columns of the same names; a column the row lacks is left undefined (the template's
    render then fails on it, as on any missing field)."""
    return {name: bounded_answer(item[name]) for name in names if name in item}


def own_variables(spec, items: Sequence[Mapping[str, Any]]) -> list[dict[str, str]] | None:
    """The variables a prompt's templates read from each item besides ``item``: a judge's
    answers from its dataset's columns; None for a prompt that is not a judge."""
    if getattr(spec, "kind", "prompt") != "judge":
        return None
    names = answers_read(spec)
    return [answer_variables(names, item) for item in items]


def answers_read(spec) -> tuple[str, ...]:
    """Which of ``ANSWER_NAMES`` a judge's templates read."""
    found: set[str] = set()
    for message in spec.messages:
        found |= names_read(message.content)
    return tuple(n for n in ANSWER_NAMES if n in found)


def majority(labels: Sequence[str | None]) -> str | None:
    """The label more than half of a judge's trials gave, or None (no majority, or the
    majority gave no label)."""
    counts: dict[str, int] = {}
    for label in labels:
        if label is not None:
            counts[label] = counts.get(label, 0) + 1
    for label, n in counts.items():
        if n * 2 > len(labels):
            return label
    return None
