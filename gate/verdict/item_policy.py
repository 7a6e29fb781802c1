"""What a mapping (prompt × dataset) says about single items and slices of them, beside its
bars (``gate.verdict.bars``), declared under the mapping in the gate config and so, like every bar,
only from the default branch::

    - dataset: support-emails
      min_accuracy: 0.85
      slice_by: channel                 # accuracy per value of this column (min_slice_accuracy)
      protected: [mail-003, mail-017]   # besides the rows whose protected column is true
      accept_breaks:
        - {item: mail-012, reason: "two totals in the email: either reading is fair"}

* ``slice_by``: an item field (a dataset column); the report gives accuracy per value of
  it, and ``min_slice_accuracy`` holds every slice of at least ``min_slice_items`` items.
* ``protected``: item ids (or a dataset column ``protected``): a protected item the live
  version answers right and the candidate wrong fails the update whatever the other bars
  say.
* ``accept_breaks``: item ids with a reason. Such an item breaking counts against neither
  ``max_broken`` nor protection; the report lists it with the reason and the commit of the
  sync that accepted it (``commit``, recorded by the gate, not written in the file), and an
  accepted item that did not break as stale. A pull request's own gate config is only
  diffed: it cannot accept its own breaks.

Everything is bounded: at most ``MAX_PROTECTED`` protected ids and ``MAX_ACCEPTED``
accepted breaks per mapping, ids of at most 191 characters, reasons of at most
``MAX_REASON`` characters on one line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gate.errors import UsageError

KEYS = ("slice_by", "protected", "accept_breaks")
MAX_PROTECTED = 1000
MAX_ACCEPTED = 200
MAX_REASON = 500
MAX_ITEM_ID = 191
COLUMN_RE = re.compile(r"[^\"\\\x00-\x1f\x7f]{1,64}")  # fullmatch: quoted into a JSON path
COMMIT_RE = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


@dataclass(frozen=True)
class AcceptedBreak:
    item: str
    reason: str
    commit: str | None = field(default=None, compare=False)  # the sync that accepted it; not its identity

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"item": self.item, "reason": self.reason}
        if self.commit:
            out["commit"] = self.commit
        return out


@dataclass(frozen=True)
class ItemPolicy:
    slice_by: str | None = None
    protected: tuple[str, ...] = ()
    accept_breaks: tuple[AcceptedBreak, ...] = ()

    @classmethod
    def parse(cls, extra: Mapping[str, Any]) -> ItemPolicy:
        """From a mapping's bars (untrusted shapes): one UsageError naming the key."""
        return cls(
            slice_by=_column(extra.get("slice_by")),
            protected=_ids(extra.get("protected")),
            accept_breaks=_accepted(extra.get("accept_breaks")),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.slice_by is not None:
            out["slice_by"] = self.slice_by
        if self.protected:
            out["protected"] = list(self.protected)
        if self.accept_breaks:
            out["accept_breaks"] = [a.to_json() for a in self.accept_breaks]
        return out

    def describe(self) -> list[str]:
        out = [] if self.slice_by is None else [f"sliced by {self.slice_by}"]
        if self.protected:
            out.append(f"{len(self.protected)} protected item{'s' if len(self.protected) != 1 else ''}")
        if self.accept_breaks:
            n = len(self.accept_breaks)
            out.append(
                f"{n} accepted break{'s' if n != 1 else ''} ({', '.join(a.item for a in self.accept_breaks[:3])}"
                f"{', …' if n > 3 else ''})"
            )
        return out

    def stamped(self, before: ItemPolicy | None, commit: str | None) -> ItemPolicy:
        """The accepted breaks with the commit that accepted each: the one recorded before
        for the same item and reason, else ``commit`` (the sync's)."""
        known = {(a.item, a.reason): a.commit for a in (before.accept_breaks if before else ())}
        return ItemPolicy(
            self.slice_by,
            self.protected,
            tuple(AcceptedBreak(a.item, a.reason, known.get((a.item, a.reason)) or commit) for a in self.accept_breaks),
        )


def _column(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not COLUMN_RE.fullmatch(value) or value != value.strip():
        raise UsageError(
            f"slice_by {str(value)[:40]!r} is not a column name (at most 64 characters, no quotes, "
            "backslashes or control characters)"
        )
    return value


def _item_id(value: Any, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise UsageError(f"{what}: {str(value)[:40]!r} is not an item id")
    text = str(value).strip()
    if not text or len(text) > MAX_ITEM_ID or _CONTROL.search(text):
        raise UsageError(f"{what}: {text[:40]!r} is not an item id (1 to {MAX_ITEM_ID} characters, one line)")
    return text


def _ids(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_PROTECTED:
        raise UsageError(f"protected must be a list of at most {MAX_PROTECTED} item ids")
    ids = [_item_id(v, "protected") for v in value]
    if len(set(ids)) < len(ids):
        raise UsageError("protected lists an item twice")
    return tuple(sorted(ids))


def _accepted(value: Any) -> tuple[AcceptedBreak, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_ACCEPTED:
        raise UsageError(f"accept_breaks must be a list of at most {MAX_ACCEPTED} {{item, reason}}")
    out, seen = [], set()
    for entry in value:
        if not isinstance(entry, Mapping) or set(entry) - {"item", "reason", "commit"}:
            raise UsageError("accept_breaks: each entry is {item: ID, reason: why breaking it is accepted}")
        item = _item_id(entry.get("item"), "accept_breaks")
        reason = entry.get("reason")
        if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON or _CONTROL.search(reason):
            raise UsageError(f"accept_breaks: item {item}: give a reason, one line of at most {MAX_REASON} characters")
        commit = entry.get("commit")
        if commit is not None and (not isinstance(commit, str) or not COMMIT_RE.fullmatch(commit)):
            raise UsageError(f"accept_breaks: item {item}: commit {str(commit)[:20]!r} is not a full commit id")
        if item in seen:
            raise UsageError(f"accept_breaks: item {item} is listed twice")
        seen.add(item)
        out.append(AcceptedBreak(item, reason.strip(), commit))
    return tuple(sorted(out, key=lambda a: a.item))
