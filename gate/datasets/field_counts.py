"""Which item fields a dataset version's rows have: field → number of rows having it,
counted once per version (at import, or once for a version imported before the gate
counted them) and stored with it (``dataset_version.fields``)::

    {"counts": {"text": 120, "channel": 80}, "rows": 120, "capped": false}

A row *has* a field when the field is there with a value: null and the empty string (a
CSV's empty cell) count as no value, since a template branching on the field is not
exercised by them. The names are bounded: at most ``MAX_FIELDS`` distinct fields of at
most ``MAX_FIELD_CHARS`` characters are counted per version; beyond that ``capped`` is
true and a field that was not counted is *unknown* (``rows_having`` None), which the gate
treats as not covered, never as covered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

MAX_FIELDS = 1000
MAX_FIELD_CHARS = 191


class FieldCounter:
    """Counts the fields of rows' inputs (the item a template sees), row by row."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.rows = 0
        self.capped = False

    def add(self, item: Any) -> None:
        self.rows += 1
        if not isinstance(item, Mapping):
            return
        for name, value in item.items():
            if value is None or value == "":
                continue
            if name in self.counts or (len(self.counts) < MAX_FIELDS and len(name) <= MAX_FIELD_CHARS):
                self.counts[name] += 1
            else:
                self.capped = True

    def to_json(self) -> dict[str, Any]:
        return {"counts": dict(sorted(self.counts.items())), "rows": self.rows, "capped": self.capped}


def rows_having(fields: Mapping[str, Any], name: str) -> int | None:
    """How many rows of a version (its stored ``fields``) have field ``name``; None when
    nobody can tell (the names were capped before this one was seen)."""
    count = (fields.get("counts") or {}).get(name)
    if count is not None:
        return int(count)
    return None if fields.get("capped") else 0
