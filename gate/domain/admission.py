"""What a submission must satisfy before it is staged, beyond a valid prompt file:

* **Labels the decision step tells apart.** Two labels that ``gate.prompt.decision`` reads as the
  same (``label_key``: case, surrounding punctuation and markdown, ``not eligible`` /
  ``not-eligible`` / ``not_eligible``) would make one of them unreachable: refused, naming
  both.
* **Expected values the decision reads.** A prompt decided field by field needs datasets
  whose rows give an expected object with each declared field, of values its comparator
  can read; a prompt decided by one label needs rows that give labels
  (``gate.prompt.structured.summary``).
* **Every branch the template takes was evaluated.** The item fields the templates read
  (``gate.prompt.template_fields``) are compared with the fields the rows of the datasets' pinned
  versions have (``gate.datasets.field_counts``): a field that no row of any mapped dataset has
  means the template does something on those rows that the gate never saw (``{% if
  item.account_tier is defined %}...{% else %}<the original>{% endif %}`` is judged on its
  else-branch only). Refused, naming the field and the datasets, unless the gate config
  (default branch) declares it optional for the prompt (``optional_fields``). A template
  that touches the item in a way that names no field is refused too. What was read, and
  by how many rows of each version, is pinned with each run (``pinned["fields"]``) and
  shown by the reports. For a submitter that may read some of the datasets but not all
  (a pull request's token, a holdout), only the ones it may read count: a refusal must not
  tell it which columns a holdout has.

A refusal about a dataset whose rows the submitter may not read names none of its fields,
values or counts (``check_expected``, ``field_coverage``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from sqlalchemy.engine import Engine

from gate import db
from gate.datasets.field_counts import rows_having
from gate.datasets.importer import count_fields
from gate.errors import SpecError, UsageError, did_you_mean
from gate.kinds import kind_of
from gate.prompt.decision import same_reading
from gate.prompt.judge import answers_read
from gate.prompt.spec import PromptSpec
from gate.prompt.structured.summary import RuleMisfit
from gate.prompt.template_fields import template_fields
from gate.prompt.templating import TemplateProblem
from gate.records import DatasetVersion
from gate.store.datasets import get_dataset, list_mappings
from gate.store.prompt_settings import optional_fields
from gate.store.versions import READY, get_version, set_version_fields

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
FIELD_PAGE = 1000  # rows per read when counting an older version's fields


def check_labels(spec: PromptSpec) -> None:
    """Refuse labels the decision step would read as the same (naming both); for a fields
    decision, those of each label field."""
    for labels, where in kind_of(spec.decision).check_labels(spec.decision, spec.labels):
        _distinct(labels, where)


def _distinct(labels, where: str) -> None:
    pair = same_reading(labels)
    if pair is None:
        return
    first, second = pair
    if first == second:
        raise SpecError(
            None,
            where,
            f"{first[:40]!r} is read as no label at all by the decision step: it is only punctuation or markdown",
        )
    raise SpecError(
        None,
        where,
        f"{first[:40]!r} and {second[:40]!r} are read as the same label by the decision "
        "step (case, surrounding punctuation and markdown, and ' ', '_', '-' do not count): keep one",
    )


def check_expected(spec: PromptSpec, versions: list[tuple[str, DatasetVersion]], hidden: Collection[str] = ()) -> None:
    """Each pinned version's expected values are what the prompt's decision reads: labels
        for a label decision; for a fields decision, objects with every declared field, of
        values its comparator can read (``gate.prompt.structured.summary.check_rule``); for a tool
        call's, its arguments (``gate.prompt.structured.expected_calls.check_call_rows``): each as its
    kind checks them (``gate.kinds``).

        ``hidden``: the datasets whose rows the submitter may not read (a holdout, for a pull
        request's token). A refusal about one of them is a fixed line naming the dataset only
        (``RuleMisfit.withheld``): no field, value or count of its rows, whatever was guessed.
        What is left is one bit per submission: the rule fits the holdout or not."""
    for name, version in versions:
        try:
            kind_of(spec.decision).check_rows(spec.decision.fields, version.fields, name)
        except RuleMisfit as exc:
            if name in hidden:
                raise UsageError(exc.withheld) from None
            raise


def fields_read(spec: PromptSpec) -> tuple[str, ...]:
    """The item fields the prompt's templates read, the conversations its ``history``
    entries insert (gate.prompt.conversation) and the columns its checks read
    (gate.prompt.checks); a SpecError when a template touches the item in a way that names
    no field. A judge in its own evaluation also reads the answers it grades from its rows'
    columns of the same names (gate.prompt.judge)."""
    try:
        found = template_fields(m.content for m in spec.messages if m.history is None)
    except TemplateProblem as exc:
        raise SpecError(None, "messages", str(exc)) from None
    history = {m.history for m in spec.messages if m.history is not None}
    answers = set(answers_read(spec)) if spec.kind == "judge" else set()
    checked = set(spec.decision.checks.columns) if spec.decision.checks is not None else set()  # gate.prompt.checks
    return tuple(sorted({*found, *history, *answers, *checked}))


def count_unknown_fields(engine: Engine, prompt_name: str) -> None:
    """Count, once, the fields of the current versions of the prompt's datasets that were
    imported before the gate counted fields at import (page by page, outside the
    submission's transaction), and store them with the version."""
    with engine.connect() as conn:
        ids = [get_dataset(conn, m.dataset_name).current_version_id for m in list_mappings(conn, prompt_name)]
        versions = [get_version(conn, i) for i in ids if i is not None]
    for version in versions:
        if version.fields is None and version.status == READY:
            fields = count_fields(engine, version.id, FIELD_PAGE)
            db.transaction(engine, lambda conn: set_version_fields(conn, version.id, fields))


def field_coverage(
    conn,
    spec: PromptSpec,
    read: Iterable[str],
    versions: list[tuple[str, DatasetVersion]],
    hidden: Collection[str] = (),
) -> dict[str, dict]:
    """dataset name → what its run pins as ``fields``: {"read": {field: rows having it
    (None: not counted)}, "rows": the version's rows, "optional": the fields read that the
    gate config declares optional}. Raises UsageError (one line) when a field read is had
    by no row of any of the datasets and is not optional.

    ``hidden``: the datasets whose rows the submitter may not read (a holdout, for a pull
    request's token). When it may read some of the others, only those count: whether a
    submission is refused then says nothing of which columns a holdout has, so a submit
    token cannot learn them field by field. A field only a holdout has is refused for it
    (an admin's submission, or ``optional_fields``, lets it through)."""
    read = sorted(read)
    optional = set(optional_fields(conn, spec.name)) if read else set()
    pinned: dict[str, dict] = {}
    for name, version in versions:
        if read and version.fields is None:
            raise UsageError(
                f"dataset {name}'s version {version.id} changed while the gate counted its fields: submit again"
            )
        counts = {f: rows_having(version.fields, f) for f in read} if read and version.fields is not None else {}
        pinned[name] = {"read": counts, "rows": version.row_count, "optional": sorted(optional & set(read))}
    readable = sorted(set(pinned) - set(hidden))
    evidence = readable if hidden and readable else sorted(pinned)
    missing = [f for f in read if f not in optional and not any(pinned[n]["read"][f] for n in evidence)]
    if missing:
        shown, names = ", ".join(_shown(f) for f in missing[:5]), ", ".join(evidence)
        if evidence != sorted(pinned):
            names = f"the datasets this token may read ({names})"
        one = len(missing) == 1
        # a close name among the fields of the datasets the submitter may read (never a holdout's)
        known = {f for n, version in versions if n in readable for f in (version.fields or {}).get("counts") or {}}
        hint = did_you_mean(missing[0], sorted(known)) if one else ""
        raise UsageError(
            f"the gate cannot evaluate what {shown} change{'s' if one else ''}: no row of {names} has "
            f"{'it' if one else 'them'}{hint} (add rows that do, or declare {'it' if one else 'them'} under "
            f"optional_fields: {spec.name}: in the gate config)"
        )
    return pinned


def _shown(field: str) -> str:
    return field if _PLAIN_NAME.fullmatch(field) else repr(field[:64])
