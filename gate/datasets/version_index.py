"""A stored version's keys in memory, for comparing copies of its file with it.

A pull request's dry run compares its copy of a dataset file with the dataset's current
version (``importer.diff_against``), which read the whole version from the database each
time: ~0.7 s of the server's CPU for a 45-byte copy of a 150,000-row dataset, so a submit
token that repeated it kept a core busy. A version's rows never change once it is READY,
so its keys — (item id, label, row hash) of every row — are read once and kept
(``VersionIndexes``), keyed by the version's id and content hash (an id a database hands
out again after a prune is another key), the least recently used let go first, all of
them within ``PROMPTGATE_DIFF_CACHE_BYTES``. A version whose keys would not fit is not
kept: it is streamed as before, each time.

``VersionIndex`` holds a version compactly, sorted by item id: the ids in a list (looked
up by bisection), each label once with a number per row, and the first 16 bytes of each
row's SHA-256 in one bytes object (a changed row is told by them as by the whole hash:
finding another row with the same 128 bits is out of reach). About 80 bytes a row for
short ids."""

from __future__ import annotations

import sys
import threading
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterable

from gate.records import EXAMPLES, DataDiff

from .importer import held_label

HASH_BYTES = 16
ROW_BYTES = 8 + HASH_BYTES + 4  # a row beside its id: its place in the list, its hash, its label's number
TOO_BIG_KEPT = 64  # versions remembered as too big to keep, so that none is read twice to learn it


class VersionIndex:
    """A version's (item id, label, row hash), sorted by item id (see the module docstring)."""

    def __init__(self, ids: list[str], labels: list[str], label_of: array, hashes: bytes):
        self.ids, self.labels, self.label_of, self.hashes = ids, labels, label_of, hashes
        self.size = (
            sys.getsizeof(ids)
            + sum(map(sys.getsizeof, ids))
            + sum(map(sys.getsizeof, labels))
            + label_of.itemsize * len(label_of)
            + len(hashes)
        )

    @classmethod
    def build(cls, keys: Iterable[tuple[str, str, str]], budget: int) -> VersionIndex | None:
        """The index of ``keys`` (a version's rows as ``importer.version_keys`` reads them),
        or None once it would come to more than ``budget`` bytes."""
        numbers: dict[str, int] = {}
        rows, size = [], 0
        for item_id, label, row_hash in keys:
            held = held_label(label)
            number = numbers.get(held)
            if number is None:
                number = numbers[held] = len(numbers)
                size += sys.getsizeof(held)
            rows.append((item_id, number, bytes.fromhex(row_hash[: 2 * HASH_BYTES])))
            size += sys.getsizeof(item_id) + ROW_BYTES
            if size > budget:
                return None
        rows.sort(key=lambda row: row[0])
        labels = sorted(numbers, key=numbers.__getitem__)
        index = cls([r[0] for r in rows], labels, array("I", [r[1] for r in rows]), b"".join(r[2] for r in rows))
        return index if index.size <= budget else None

    def __len__(self) -> int:
        return len(self.ids)

    def find(self, item_id: str) -> int | None:
        at = bisect_left(self.ids, item_id)
        return at if at < len(self.ids) and self.ids[at] == item_id else None

    def label(self, at: int) -> str:
        return self.labels[self.label_of[at]]

    def same_row(self, at: int, row_hash: str) -> bool:
        return self.hashes[at * HASH_BYTES : (at + 1) * HASH_BYTES] == bytes.fromhex(row_hash[: 2 * HASH_BYTES])


def diff_against_index(index: VersionIndex, rows: Iterable[tuple[str, str, str]], max_rows: int) -> DataDiff:
    """``importer.diff_against`` over a kept version: the same answer (examples in item-id
    order), at the cost of the proposed rows and a look-up each, not of the version."""
    proposed: dict[str, tuple[str, str]] = {}
    for item_id, label, row_hash in rows:
        if len(proposed) >= max_rows:
            return DataDiff(too_large=max_rows)
        proposed[item_id] = (held_label(label), row_hash)
    result, found = DataDiff(rows=len(proposed)), {}
    for item_id in proposed:
        at = index.find(item_id)
        if at is not None:
            found[at] = item_id
    _removed(result, index, found)
    for at in sorted(found):
        item_id, (label, row_hash) = found[at], proposed.pop(found[at])
        if index.label(at) != label:
            result.note("relabelled", f"{item_id}: {index.label(at)} → {label}")
        elif not index.same_row(at, row_hash):
            result.note("changed", item_id)
    for item_id, (label, _) in proposed.items():
        result.note("added", f"{item_id} ({label})")
    return result


def _removed(result: DataDiff, index: VersionIndex, found: dict[int, str]) -> None:
    """The version's rows the copy lacks: how many, and the first few by item id."""
    result.removed = len(index) - len(found)
    at = 0
    while len(result.examples["removed"]) < min(EXAMPLES, result.removed):
        if at not in found:
            result.examples["removed"].append(f"{index.ids[at]} ({index.label(at)})")
        at += 1


class VersionIndexes:
    """Kept ``VersionIndex``es, at most ``budget`` bytes of them (0: none kept), shared by
    the service's threads. One is built at a time: dry runs arriving together for a version
    not yet kept read it once."""

    def __init__(self, budget: int):
        self.budget = budget
        self.kept: OrderedDict[tuple[int, str], VersionIndex] = OrderedDict()
        self.too_big: OrderedDict[tuple[int, str], bool] = OrderedDict()
        self.lock, self.building = threading.Lock(), threading.Lock()

    def index_of(self, version, keys: Callable[[], Iterable[tuple[str, str, str]]]) -> VersionIndex | None:
        """``version``'s index (a ``DatasetVersion``), built from ``keys()`` if it is not
        kept yet; None when it would not fit the budget (compare by streaming then)."""
        key = (version.id, version.content_hash or "")
        if version.row_count * (ROW_BYTES + sys.getsizeof("")) > self.budget:
            return None
        found, too_big = self._kept(key)
        if found is not None or too_big:
            return found
        with self.building:
            found, too_big = self._kept(key)
            if found is not None or too_big:
                return found
            built = VersionIndex.build(keys(), self.budget)
            with self.lock:
                if built is None:
                    self.too_big[key] = True
                    while len(self.too_big) > TOO_BIG_KEPT:
                        self.too_big.popitem(last=False)
                    return None
                self.kept[key] = built
                while sum(i.size for i in self.kept.values()) > self.budget:
                    self.kept.popitem(last=False)
            return built

    def _kept(self, key) -> tuple[VersionIndex | None, bool]:
        """The index kept for ``key``, and whether it is known to be too big to keep."""
        with self.lock:
            found = self.kept.get(key)
            if found is not None:
                self.kept.move_to_end(key)
            return found, key in self.too_big
