"""The report's sections, as one description both surfaces render: the pull request's
comment (``gate/report/templates``, Markdown) and the status page's update
(``gate/service/templates``, HTML). A kind names its own (``DecisionKind.sections``); each
is a ``Section``: its key (which template renders it, ``sections/KEY.md.j2`` and
``sections/KEY.html.j2``), its title (the heading both show) and where it stands (``update``:
one table over the update's datasets; ``run``: per dataset, in the comment's details).

What a section shows is the report's (``gate.report.sections``: whether a run has its
figures); that it is shown on both surfaces, under the same title, is this module's."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Key(StrEnum):
    PROTECTED = "protected"  # protected items that broke
    COMPARED = "compared"  # live against the candidate on the same items
    CHECKS = "checks"  # every bar and how the run stands against it
    CHECK_RATES = "check_rates"  # a decision with checks (checks alone, or before a judge): per check
    FIELDS = "fields"  # per field (a fields decision) or per argument (a tool call's)
    SLICES = "slices"  # per value of the mapping's slice_by column
    ACCEPTED = "accepted"  # the mapping's accepted breaks
    JUDGE = "judge"  # a judged run's judge: agreement, corrected rate, sentinels
    TOOL_CALLS = "tool_calls"  # a tool call's marked answers, parallel calls
    SCHEMA = "schema"  # a strict response schema's breaks
    LABELS = "labels"  # the confusion matrix and per-label figures
    FIELD_CONFUSION = "field_confusion"  # a fields decision's label fields, one matrix each
    UNSTABLE = "unstable"  # items whose trials disagree
    BROKEN = "broken"  # items live answered right, the candidate wrong
    FAILING = "failing"  # the other failing items


@dataclass(frozen=True)
class Section:
    key: Key
    title: str  # the heading, the same on both surfaces
    scope: str  # "update": one table over the datasets; "run": per dataset

    @property
    def anchor(self) -> str:
        return f"sec-{self.key.value}"


def _update(key: Key, title: str) -> Section:
    return Section(key, title, "update")


def _run(key: Key, title: str) -> Section:
    return Section(key, title, "run")


# Every kind's, in the order both surfaces show them; a kind adds its own (KIND_SECTIONS).
PROTECTED = _update(Key.PROTECTED, "Protected items broken")
COMPARED = _update(Key.COMPARED, "Against the live version, on the same items")
CHECKS = _update(Key.CHECKS, "Bars")
SLICES = _update(Key.SLICES, "By slice")
ACCEPTED = _update(Key.ACCEPTED, "Accepted breaks")
SCHEMA = _update(Key.SCHEMA, "Response schema")
UNSTABLE = _run(Key.UNSTABLE, "Unstable items")
BROKEN = _run(Key.BROKEN, "Broken items")
FAILING = _run(Key.FAILING, "Failing items")

FIELDS = _update(Key.FIELDS, "Field by field")
ARGUMENTS = _update(Key.FIELDS, "Arguments, field by field")
JUDGE = _update(Key.JUDGE, "The judge")
CHECK_RATES = _update(Key.CHECK_RATES, "Check by check")  # shown when a run has check rates
TOOL_CALLS = _update(Key.TOOL_CALLS, "Tool calls")
LABELS = _run(Key.LABELS, "Confusion matrix")
FUNCTIONS = _run(Key.LABELS, "Function confusion matrix")
FIELD_CONFUSION = _run(Key.FIELD_CONFUSION, "Label fields: confusion matrices")
CALL_CONFUSION = _run(Key.FIELD_CONFUSION, "Function confusion matrix")  # a tool call's with arguments

ORDER = tuple(Key)


def ordered(sections: list[Section] | tuple[Section, ...]) -> tuple[Section, ...]:
    """``sections`` in the order both surfaces show them, each key once."""
    by_key = {s.key: s for s in sections}
    return tuple(by_key[k] for k in ORDER if k in by_key)


def every_kind() -> tuple[Section, ...]:
    return (PROTECTED, COMPARED, CHECKS, SLICES, ACCEPTED, SCHEMA, UNSTABLE, BROKEN, FAILING)
