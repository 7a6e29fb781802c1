"""A check against the bars a pull request proposes for a prompt the gate does not gate yet
(issue 35.1): its gate config declares them, the gate has none, and a pull request never
sets the gate's bars. So the check is judged on the proposed bars, marked so in its source
(``proposed_bars``) and in every report, never as a pass of the gate's bars; the merge
push syncs the config and judges the prompt again on the bars then in the gate (apply).

Allowed only in check mode and only for a prompt with no mapping in the gate (a pull request
cannot swap the bars of a gated prompt for its own), on datasets already in the gate that the
submitter may read (no holdout: its counts would tell a pull request how it does there)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gate.errors import UsageError
from gate.records import DatasetMapping
from gate.states import Mode
from gate.store.datasets import find_dataset, list_mappings
from gate.store.versions import get_version
from gate.verdict.bars import Bars

MAX_PROPOSED = 50


def proposed_mappings(
    conn, prompt_name: str, mode: str, proposed: list[dict], may_read: Callable[[Any], bool] | None
) -> list[DatasetMapping]:
    """The proposed bars as the mappings a submission pins (see the module docstring)."""
    if mode != Mode.CHECK:
        raise UsageError("proposed bars are for a check (a pull request's): an apply is judged on the gate's bars")
    if list_mappings(conn, prompt_name):
        raise UsageError(
            f"prompt {prompt_name} is gated already: it is judged on the gate's bars, never on a pull request's"
        )
    if not isinstance(proposed, list) or not 0 < len(proposed) <= MAX_PROPOSED:
        raise UsageError(f"proposed_bars: a list of 1 to {MAX_PROPOSED} bars ({{dataset, min_accuracy, bars}})")
    mappings, seen = [], set()
    for entry in proposed:
        if not isinstance(entry, dict) or not isinstance(entry.get("dataset"), str):
            raise UsageError("proposed_bars: each bar is {dataset, min_accuracy, bars}")
        ds = find_dataset(conn, entry["dataset"])
        current = get_version(conn, ds.current_version_id) if ds is not None and ds.current_version_id else None
        if ds is None or (may_read is not None and not may_read(current)) or ds.id in seen:
            raise UsageError(
                f"proposed bar on dataset {entry['dataset'][:128]!r}: not a dataset of the gate this submitter may "
                "read (a proposed bar names a dataset a gate config declared from the repository)"
            )
        seen.add(ds.id)
        bars = Bars.parse(entry.get("min_accuracy"), entry.get("bars"))
        mappings.append(DatasetMapping(prompt_name, ds.id, ds.name, bars.min_accuracy, bars.extra()))
    return mappings
