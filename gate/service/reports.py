"""What the service hands out about an update: its report (per run: the counts, the
accuracy, the bar it is judged against, a few failing items) as frozen dataclasses, and
``to_dict`` for ``status --json``."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

from ..models import ItemSample, Run, Update
from ..scoring import clears
from ..states import EXIT_CODES, UPDATE_TERMINAL, RunStatus, UpdateStatus


@dataclass(frozen=True)
class RunReport:
    run_id: int
    dataset: str
    bar: Decimal
    status: str
    total: int
    scored: int
    matches: int
    errors: int
    pending: int
    accuracy: float | None          # raw matches / scored, for display; the gate uses exact fractions
    passed: bool | None             # None until the run is DONE
    reason: str | None
    row_count: int
    content_hash: str | None
    source_version: str | None
    source_uri: str
    metrics: dict | None
    failures: list[ItemSample] = field(default_factory=list)
    dataset_version_id: int | None = None
    pinned: dict | None = None          # what the verdict stands on (gate.reuse.pin)
    reused: dict[int, int] = field(default_factory=dict)   # update id -> answers reused from it

    @property
    def reused_total(self) -> int:
        return sum(self.reused.values())


@dataclass(frozen=True)
class UpdateReport:
    update: Update
    runs: list[RunReport]
    attempts: dict[str, int]

    @property
    def status(self) -> str:
        return self.update.status

    @property
    def terminal(self) -> bool:
        return self.update.status in UPDATE_TERMINAL

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[UpdateStatus(self.update.status)]

    def to_dict(self) -> dict[str, Any]:
        def plain(value):
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [plain(v) for v in value]
            if isinstance(value, Decimal):
                return float(value)
            if isinstance(value, dt.datetime):
                return value.isoformat() + "Z"
            return value
        u = asdict(self.update)
        return plain({"id": u.pop("id"), **u, "runs": [asdict(r) for r in self.runs], "attempts": self.attempts})


def run_report(run: Run, counts, failures: list[ItemSample], reused: dict[int, int] | None = None) -> RunReport:
    metrics = run.metrics or {}
    matches = metrics.get("matches", counts.match)
    scored = metrics.get("scored", counts.scored)
    passed = clears(matches, scored, run.min_accuracy) if run.status == RunStatus.DONE else None
    return RunReport(
        run_id=run.id, dataset=run.dataset_name, bar=run.min_accuracy, status=run.status,
        total=metrics.get("total", counts.total), scored=scored, matches=matches,
        errors=metrics.get("errors", counts.error), pending=counts.pending,
        accuracy=(matches / scored) if scored else None, passed=passed, reason=run.reason,
        row_count=run.row_count, content_hash=run.content_hash, source_version=run.source_version,
        source_uri=run.source_uri, metrics=run.metrics, failures=failures, dataset_version_id=run.dataset_version_id,
        pinned=run.pinned, reused=reused or {})
