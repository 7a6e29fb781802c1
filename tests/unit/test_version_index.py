"""A kept version (``gate.datasets.version_index``) compares a copy of its file as reading
it from the database does: ``importer.diff_ordered`` is the reference (both streams in
item-id order), over random versions and copies with rows added, removed, relabelled,
changed and long labels; and the kept versions stay within their budget."""

from __future__ import annotations

import hashlib
import random
from types import SimpleNamespace

import pytest

from gate.datasets.importer import diff_ordered, held_label
from gate.datasets.version_index import VersionIndex, VersionIndexes, diff_against_index


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def version_and_copy(seed: int) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    rng = random.Random(seed)
    labels = ["yes", "no", "Maybe", "x" * 300, "x" * 299 + "y"]  # two long ones alike in their first 64
    rows = {f"i{n:05d}": (rng.choice(labels), digest(f"{seed} {n}")) for n in rng.sample(range(10_000), 300)}
    copy = {}
    for item_id, (label, row_hash) in rows.items():
        roll = rng.random()
        if roll < 0.2:
            continue  # removed
        if roll < 0.3:
            label = rng.choice(labels)  # relabelled, or the same label again
        elif roll < 0.4:
            row_hash = digest(f"changed {item_id}")
        copy[item_id] = (label, row_hash)
    for n in range(rng.randrange(0, 40)):
        copy[f"new{n:03d}"] = (rng.choice(labels), digest(f"new {n}"))
    as_keys = lambda d: [(k, label, h) for k, (label, h) in d.items()]  # noqa: E731
    version, proposed = as_keys(rows), as_keys(copy)
    rng.shuffle(proposed)  # a file's order is its own
    return sorted(version), proposed


@pytest.mark.parametrize("seed", range(12))
def test_a_kept_version_compares_as_the_database_does(seed):
    version, proposed = version_and_copy(seed)
    index = VersionIndex.build(list(reversed(version)), 1 << 30)  # any order in: sorted inside
    got = diff_against_index(index, proposed, 200_000)
    held = lambda keys: sorted((k, held_label(label), h) for k, label, h in keys)  # noqa: E731
    want = diff_ordered(held(version), held(proposed))
    assert (got.added, got.removed, got.relabelled, got.changed, got.rows) == (
        want.added,
        want.removed,
        want.relabelled,
        want.changed,
        want.rows,
    )
    for kind in ("removed", "relabelled", "changed"):  # in item-id order, as the version is streamed
        assert got.examples[kind] == want.examples[kind], kind
    ids = {k for k, _, _ in version}
    added = [f"{k} ({held_label(label)})" for k, label, _ in proposed if k not in ids]  # in the file's order
    assert got.examples["added"] == added[: len(got.examples["added"])] and len(got.examples["added"]) == len(
        want.examples["added"]
    )
    assert diff_against_index(index, proposed, 10).too_large == 10


def test_kept_versions_stay_within_their_budget_and_one_too_big_is_read_each_time():
    def version(n: int, rows: int):
        keys = [(f"v{n}-{i:06d}", "yes", digest(f"{n} {i}")) for i in range(rows)]
        return SimpleNamespace(id=n, content_hash=f"h{n}", row_count=rows), keys

    small = [version(n, 1000) for n in range(4)]
    budget = 2 * VersionIndex.build(small[0][1], 1 << 30).size + 100  # room for two
    kept, reads = VersionIndexes(budget), []

    def index_of(v, keys):
        return kept.index_of(v, lambda: reads.append(v.id) or iter(keys))

    for v, keys in small + small[2:]:  # 0, 1, 2, 3, then 2 and 3 again: kept
        assert index_of(v, keys) is not None
    assert reads == [0, 1, 2, 3] and sum(i.size for i in kept.kept.values()) <= budget
    assert index_of(*small[0]) is not None and reads == [0, 1, 2, 3, 0]  # let go: read again
    big, big_keys = version(9, 1000)
    big.row_count = 10  # its row count says it fits; its keys do not
    tight, big_reads = VersionIndexes(budget // 3), []
    for _ in range(2):  # found too big once, then not read again to learn it
        assert tight.index_of(big, lambda: big_reads.append(1) or iter(big_keys)) is None
    assert big_reads == [1]
    assert VersionIndexes(0).index_of(*small[1]) is None  # 0: nothing kept
