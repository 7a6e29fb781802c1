"""Rows as frozen dataclasses: what the store returns and the service hands out."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any


@dataclass(frozen=True)
class Dataset:
    id: int
    name: str
    source_uri: str
    options: dict[str, Any]
    created_at: dt.datetime


@dataclass(frozen=True)
class Mapping:
    prompt_name: str
    dataset_id: int
    dataset_name: str
    min_accuracy: Decimal


@dataclass(frozen=True)
class LivePrompt:
    name: str
    version: int
    config: dict[str, Any]
    config_hash: str
    applied_update_id: int | None
    updated_at: dt.datetime


@dataclass(frozen=True)
class Update:
    id: int
    prompt_name: str
    mode: str
    status: str
    candidate_config: dict[str, Any]
    candidate_hash: str
    base_version: int
    source: dict[str, Any]
    reason: str | None
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None


@dataclass(frozen=True)
class Run:
    id: int
    update_id: int
    dataset_id: int
    dataset_name: str
    source_uri: str
    source_options: dict[str, Any]
    status: str
    min_accuracy: Decimal
    row_count: int
    content_hash: str | None
    source_version: str | None
    materialize_cursor: str | None
    materialized_at: dt.datetime | None
    lease_token: str | None
    attempt: int
    metrics: dict[str, Any] | None
    reason: str | None
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None


@dataclass(frozen=True)
class RunCandidate:
    """What a run evaluates: the update's prompt name, candidate config, and the provider
    declaration it was submitted with (None: the default provider)."""
    prompt_name: str
    config: dict[str, Any]
    provider: dict[str, Any] | None


@dataclass(frozen=True)
class ClaimedItem:
    id: int
    run_id: int
    item_id: str
    input: dict[str, Any]
    expected_decision: str
    attempt: int


@dataclass(frozen=True)
class ItemResult:
    """What the executor writes back for one claimed item."""
    id: int
    verdict: str                      # MATCH / MISMATCH / ERROR, or PENDING for a retry
    actual_decision: str | None = None
    raw_output: str | None = None
    latency_ms: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None
    retry_in: float | None = None     # seconds until the retry is visible (PENDING only)


@dataclass(frozen=True)
class ItemSample:
    item_id: str
    expected_decision: str
    actual_decision: str | None
    verdict: str
    raw_output: str | None
    error: str | None


@dataclass(frozen=True)
class RunCounts:
    total: int = 0
    pending: int = 0
    match: int = 0
    mismatch: int = 0
    error: int = 0

    @property
    def scored(self) -> int:
        return self.match + self.mismatch


@dataclass(frozen=True)
class WorkerRow:
    id: str
    role: str
    host: str
    pid: int
    started_at: dt.datetime
    heartbeat_at: dt.datetime
