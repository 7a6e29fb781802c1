"""A run's pin and its figures are records with one codec (``gate.records.pinned.Pinned``,
``gate.records.metrics.RunFigures``): what reads them reads an attribute, never a chain of
``(run.pinned or {}).get(...)`` or ``(metrics.get("live") or {}).get(...)`` over the stored
JSON (issue 45, point 3). Chains over other JSON (a dataset row, a GitHub payload, a provider's
answer) are not these records' business."""

from __future__ import annotations

import re

from support.cli import ROOT

# (x.pinned or {}).get(   (x.metrics or {}).get(   (metrics or {}).get(   (pinned or {}).get(
_ON_RECORD = re.compile(r"\((?:[\w.\[\]]+\.)?(?:pinned|metrics|figures)\s+or\s+\{\}\)\s*\.get\(")
# (metrics.get("live") or {}).get(   (run.pinned.get("judge") or {}).get(
_THROUGH_KEY = re.compile(r"\((?:[\w.\[\]]+\.)?(?:pinned|metrics|figures)\.get\([^()]*\)\s+or\s+\{\}\)\s*\.get\(")


def chains(text: str) -> list[str]:
    return [m.group(0) for pattern in (_ON_RECORD, _THROUGH_KEY) for m in pattern.finditer(text)]


def test_the_patterns_catch_the_chains_they_name():
    assert chains('int((run.pinned or {}).get("rows") or 0)')
    assert chains('kept == (row.metrics or {}).get("total")')
    assert chains('(metrics.get("live") or {}).get("run_id")')
    assert chains('(run.pinned.get("judge") or {}).get("name")')
    assert not chains('(version.fields or {}).get("counts")')
    assert not chains('(pr.get("head") or {}).get("sha")')


def test_no_chain_reads_a_pin_or_figures():
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for package in ("gate", "workers")
        for path in sorted((ROOT / package).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if chains(line)
    ]
    assert not found, "read the record's attribute (Pinned.of, RunFigures.of), not the JSON:\n" + "\n".join(found)
