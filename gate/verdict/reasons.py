"""Why a run or an update ended, in the words every reader gets, and the item detail only
some may read.

A run's ``reason`` and its update's (composed from it: ``gate.verdict.update_outcome``) reach any
reader of the update — the API, ``/wait``, the updates list, the status page, the pull
request's comment — whichever dataset the run was on, a holdout too (a dataset whose rows
only admin reads: ``gate.datasets.readability.version_readable``). So a reason says counts and kinds
and never an item's id or value: "3 of 20 items of d could not be scored (template: 2,
timeout: 1; see the failing items)". Which items, and what they said, go to the run's
metrics under ``ITEM_DETAIL``, which the service leaves out for a reader who may not read
the dataset's rows, as it leaves out the failing items themselves; the reports show it to
the others (``detail_text``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

ITEM_DETAIL = "item_detail"  # a run's metrics: what its reason leaves out (ids, values, errors)
DETAIL_CHARS = 300


def kinds_text(kinds: Mapping[str, int]) -> str:
    """``{"template": 2, "timeout": 1}`` as "template: 2, timeout: 1", the most first."""
    return ", ".join(f"{kind}: {n:,}" for kind, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))


def errors_reason(
    errors: int, total: int, dataset: str, kinds: Mapping[str, int] | None = None, budget: str | None = None
) -> str:
    """A run with items that could not be scored, by count and kind of error; ``budget``:
    the first budget error, which the gate words itself and which names no item (the
    template sandbox's budget, or a run's mean render time), so it may be said."""
    by_kind = f"{kinds_text(kinds)}; " if kinds else ""
    said = f": {budget.removeprefix('budget: ')[:DETAIL_CHARS]}" if budget else ""
    return f"{errors:,} of {total:,} items of {dataset} could not be scored ({by_kind}see the failing items){said}"


def unknown_labels_reason(dataset: str, rows: int, labels: int, prompt_labels: list[str]) -> str:
    """A dataset version whose rows give labels the prompt does not have: how many rows and
    how many labels, never which (a holdout's labels are its values)."""
    return (
        f"dataset {dataset}: {rows:,} row(s) with {labels:,} label(s) the prompt does not have "
        f"(its labels: {', '.join(prompt_labels)})"
    )


def first_error_detail(item_id: str, error: str | None) -> dict[str, Any]:
    return {"first_error": {"item_id": item_id, "error": (error or "")[:DETAIL_CHARS]}}


def detail_text(metrics: Mapping[str, Any] | None) -> str | None:
    """A run's item detail in one line for the reports (None: none, or left out for this
    reader)."""
    from gate.records.metrics import RunFigures  # the records: not for a command that prints its version

    detail = RunFigures.of(metrics).item_detail
    if not isinstance(detail, Mapping):
        return None
    parts = []
    first = detail.get("first_error")
    if isinstance(first, Mapping):
        parts.append(f"the first: item {first.get('item_id')}: {first.get('error')}")
    labels = detail.get("unknown_labels")
    if isinstance(labels, Mapping) and labels:
        parts.append("labels the prompt does not have: " + ", ".join(f"{k!r} ({n:,} rows)" for k, n in labels.items()))
    misfit = detail.get("misfit")  # the decision that cannot read a holdout's expected values, and why
    if isinstance(misfit, str):
        parts.append(misfit)
    examples = [e for e in detail.get("examples") or () if isinstance(e, Mapping)]
    if examples:
        parts.append("e.g. " + "; ".join(f"item {e.get('item_id')}: {e.get('expected')!r}" for e in examples))
    return "; ".join(parts) or None


# Where a reason written before reasons named no item (issue 33) began to name one, and the
# words that stand for what is cut, in this order: finalize's first failing item, the rows
# with labels the prompt lacked, an item over its budget, the protected items that broke.
_LEGACY_ITEMS = (
    ("; the first: ", " (see the failing items)"),
    ("): item ", ")"),
    (": item ", ": (an item's detail, left out)"),
    (" broke (", " broke"),
)
_LEGACY_SLICE = re.compile(r"min_slice_accuracy\[(?![^\]]*\]: a slice at )")


def without_legacy_items(reason: str | None) -> str | None:
    """A stored reason as it is read: one written by an earlier version of the gate, which
    copied items into reasons, cut where it named the first one (from there to its end,
    which may drop the reasons of later runs: better than an item). A reason written now
    holds none of these words and is read as it is."""
    if not reason:
        return reason
    for marker, instead in _LEGACY_ITEMS:
        if marker in reason:
            reason = reason[: reason.index(marker)] + instead
    found = _LEGACY_SLICE.search(reason)
    return reason[: found.start()] + "min_slice_accuracy (a slice's value, left out)" if found else reason


# --- bars in plain words: one name per bar on every surface (issue 49.6) --------------------

_PLAIN = {
    "min_accuracy": "accuracy",
    "max_broken": "items broken against live",
    "max_latency_p95_ms": "p95 latency",
    "max_cost_per_1k_items": "cost per 1,000 items",
    "max_error_rate": "items that could not be scored",
    "max_drop": "drop against live",
    "protected": "protected items broken",
}


def plain_bar(name: str, label: str | None = None) -> str:
    """A bar as a reader says it: ``min_field_accuracy[amount]`` → "amount read right",
    ``min_recall[urgent]`` → "recall of urgent"; a bar named nowhere here, its key in words."""
    if name == "min_field_accuracy" and label is not None:
        return f"{label} read right"
    if name in ("min_recall", "min_precision") and label is not None:
        return f"{name.removeprefix('min_')} of {label}"
    if name == "min_check_rate" and label is not None:
        return f"items passing the check {label}"
    if name == "min_slice_accuracy":  # a slice's own ("channel=chat"), or every slice of a column
        if label is not None and "=" in label:
            return f"accuracy of the slice {label}"
        return f"accuracy of each slice{f' by {label}' if label is not None else ''}"
    plain = _PLAIN.get(name, name.replace("_", " "))
    return plain if label is None or name in _PLAIN else f"{plain} of {label}"


def _spaced(text: str | None) -> str:
    """ "50.0%" → "50.0 %" as the sentences write a share."""
    text = text or "n/a"
    return text[:-1] + " %" if text.endswith("%") and not text.endswith(" %") else text


def plain_miss(name: str, label: str | None, value: str | None, limit: str) -> str:
    """A failed bar in a sentence: "amount read right on 50.0 % of items, needs 85 %";
    "accuracy 48.6 %, needs 90 %"; "p95 latency 900 ms, at most 250 ms"."""
    what, shown, bar = plain_bar(name, label), _spaced(value), _spaced(limit)
    if name == "min_field_accuracy":
        return f"{what} on {shown} of items, needs {bar}"
    if name.startswith("min_"):
        return f"{what} {shown}, needs {bar}"
    if name == "max_broken":
        return f"{shown} items broken against live, at most {bar}"
    if name == "protected":
        return f"{shown} protected item{'s' if shown != '1' else ''} broken, none allowed"
    if name == "max_drop":
        return f"{what} {shown}, at most {bar.lstrip(chr(0x2212))}"
    return f"{what} {shown}, at most {bar}"


# The bars a stored reason names by their keys (``gate.verdict.update_outcome``: "d
# min_field_accuracy[amount] 85.0% < bar 90%"), each a whole word of its own: a dataset's name
# holding one ("max_broken_set") is no bar. The stored reason keeps the keys (what the JSON API
# returns, what ``gate.service.dataset_access`` redacts a holdout's figures from); a reader is
# shown it with each bar by its plain name, as the tables name it (``plain_reason``).
_KEYED_BARS = (
    "min_field_accuracy|min_check_rate|min_slice_accuracy|min_recall|min_precision|max_broken|max_drop"
    "|max_latency_p95_ms|max_cost_per_1k_items|max_error_rate|max_inconsistent|max_loss_rate"
    "|min_judge_items|min_judge_j|min_judge_kappa|min_slice_items"
)
_KEYED = re.compile(rf"(?<![\w.\-])({_KEYED_BARS})(?:\[([^\]\n]{{0,200}})\])?(?![\w.\-\[])")


def plain_reason(reason: str | None) -> str | None:
    """A stored reason as a reader is shown it: every bar by its one plain name ("d
    min_field_accuracy[amount] 85.0% < bar 90%" → "d amount read right 85.0% < bar 90%"),
    the figures and the rest as they are (a holdout's "(figure left out)" too)."""
    if not reason:
        return reason
    return _KEYED.sub(lambda m: plain_bar(m.group(1), m.group(2)), reason)
