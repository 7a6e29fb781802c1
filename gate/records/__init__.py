"""Rows as frozen dataclasses: what the store returns and the service hands out."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .metrics import RunMetrics
from .pinned import Pinned


@dataclass(frozen=True)
class Dataset:
    id: int
    name: str
    source_uri: str
    options: dict[str, Any]
    created_at: dt.datetime
    current_version_id: int | None = None


@dataclass(frozen=True)
class DatasetVersion:
    """An immutable import of a dataset's rows, keyed by its content hash."""

    id: int
    dataset_id: int
    status: str  # IMPORTING, READY
    content_hash: str | None
    row_count: int
    labels: dict[str, int]  # label -> rows
    source_uri: str
    source_options: dict[str, Any]
    source_version: str | None
    created_at: dt.datetime
    # which item fields its rows have (gate.datasets.importer.FieldCounter); None: not counted yet
    fields: dict[str, Any] | None = None
    number: int | None = None  # 1, 2, 3 … per dataset, given when it went READY ("v3")

    @property
    def label(self) -> str:
        """How outputs name it: "v3" (its number in its dataset), or "id 12" before it has one."""
        return f"v{self.number}" if self.number is not None else f"id {self.id}"


@dataclass(frozen=True)
class VersionRow:
    position: int
    item_id: str
    expected: str
    input: dict[str, Any]
    row_hash: str


@dataclass(frozen=True)
class DatasetMapping:
    prompt_name: str
    dataset_id: int
    dataset_name: str
    min_accuracy: Decimal
    bars: dict[str, Any] | None = None  # the bars beyond min_accuracy (gate.verdict.bars.Bars.extra)
    declared_in: str | None = None  # the gate config that declared it (None: the CLI's, `dataset map`)


@dataclass(frozen=True)
class LivePrompt:
    name: str
    version: int
    config: dict[str, Any]
    config_hash: str
    applied_update_id: int | None
    updated_at: dt.datetime
    kind: str = "apply"  # how this version went live: 'apply' or 'rollback'
    restored_version: int | None = None  # a rollback: the version whose config it made live again
    actor: str | None = None  # a rollback: who
    reason: str | None = None  # a rollback: why

    def how(self) -> str:
        """How this version went live, in words: "rollback to v1 by ci, reason: …" or
        "applied by update #7"."""
        if self.kind == "rollback":
            return f"rollback to v{self.restored_version} by {self.actor or '?'}, reason: {(self.reason or '').strip()}"
        return f"applied by update #{self.applied_update_id}" if self.applied_update_id else "applied"


@dataclass(frozen=True)
class Hold:
    """A config a rollback moved away from: its apply is refused until a submission overrides it."""

    prompt_name: str
    config_hash: str
    held_version: int  # the version rolled back away from
    rollback_version: int  # the version the rollback made
    actor: str | None
    reason: str | None
    created_at: dt.datetime

    def line(self) -> str:
        """The rollback in words: who, when, why."""
        when = f"{self.created_at:%Y-%m-%d %H:%M} UTC" if isinstance(self.created_at, dt.datetime) else self.created_at
        return (
            f"v{self.held_version}'s config was rolled back by {self.actor or '?'} at {when} "
            f"(v{self.rollback_version}): {(self.reason or '').strip()}"
        )


@dataclass(frozen=True)
class CommitRecord:
    """What the Action's push job did for a commit: ``outcome`` submitted (``update_ids``),
    nothing (nothing needed gating) or not-gated (an ungated or invalid prompt file, a gate
    config that could not be synced: ``detail`` says which, in one line)."""

    sha: str
    outcome: str
    update_ids: tuple[int, ...] = ()
    detail: str | None = None
    repo: str | None = None
    ref: str | None = None
    recorded_by: str | None = None
    recorded_at: dt.datetime | None = None


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
    full: bool = False  # `submit --full`: no run of it stops early
    # the spend caps pinned at submit and its calls' upper bound (gate.calls.spend_caps)
    limits: dict[str, Any] | None = None
    stopped: dict[str, Any] | None = None  # why it stopped before every item was called (early stop, spend cap)


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
    metrics: RunMetrics | None  # what finalize and reconcile figured (gate.records.metrics)
    reason: str | None
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    dataset_version_id: int | None = None
    pinned: Pinned = field(default_factory=Pinned)  # what the verdict stands on (gate.records.pinned)
    role: str = "candidate"  # or "baseline": the live version, for the comparison
    dataset_version_number: int | None = None  # that version's number in its dataset ("v3")
    stopped: str | None = None  # early_stop, with_update or spend_cap: its items were not all called


@dataclass(frozen=True)
class RunCandidate:
    """What a run evaluates: the update's prompt name, candidate config, and the provider
    declaration it was submitted with (None: the default provider)."""

    prompt_name: str
    config: dict[str, Any]
    provider: dict[str, Any] | None
    update_id: int = 0
    reuse: bool = True  # may answers already paid for be reused
    dataset_version_id: int | None = None


@dataclass(frozen=True)
class ClaimedItem:
    run_id: int
    position: int  # the row's place in the run's dataset version: the item's key
    item_id: str
    input: dict[str, Any] | None  # None: read from the dataset version's row
    expected_decision: str
    attempt: int  # the attempt a call of this claim would be: its attempts recorded so far, plus one
    claims: int = 1  # its claims in a row without a write-back, this one included (> 1: a claim of it was lost)
    throttled_for: float | None = None  # seconds since the provider first asked it to wait (a 429), at the claim


@dataclass(frozen=True)
class ItemResult:
    """What the executor writes back for one claimed item (of the chunk's run)."""

    position: int
    verdict: str  # MATCH / MISMATCH / ERROR, or PENDING for a retry
    actual_decision: str | None = None
    raw_output: str | None = None
    latency_ms: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None
    retry_in: float | None = None  # seconds until the retry is visible (PENDING only)
    answer_key: str | None = None  # the request's reuse key (gate.prompt.request_keys); of trial 1 with trials
    reused_update_id: int | None = None  # the update whose answer this is, when reused
    trials: tuple[Trial, ...] | None = None  # each trial's answer, with trials > 1 (gate.prompt.trials)
    unstable: bool = False  # the trials' answers disagree
    fields_wrong: int | None = None  # a fields decision: bits of the fields that did not match
    fields_missing: int | None = None  # ... and of those the answer did not have (gate.prompt.structured.compare)
    calls: int = 0  # model calls made for it (0: reused, or not called)
    judge: dict[str, Any] | None = None  # a judged item: what the report shows of its judging (gate.prompt.judge)
    judging: Any = None  # and what its write-back keeps besides (workers.execute.judging.Judged)
    backpressure: bool = False  # the provider answered 429 with a Retry-After: waiting, not an attempt


@dataclass(frozen=True)
class Sentinel:
    """One sentinel of a run: its number, the run's item it is judged beside, the judge's
    dataset row (id, input, the humans' verdict)."""

    number: int
    ride_position: int
    item_id: str
    input: dict[str, Any]
    expected_decision: str


@dataclass(frozen=True)
class SentinelResult:
    """What the judge said of one sentinel (verdict MATCH: it agreed with the humans)."""

    number: int
    verdict: str
    actual_decision: str | None
    raw_output: str | None
    calls: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


TRIAL_OUTPUT_LIMIT = 200  # characters of each trial's output kept with its item
TRIAL_ERROR_LIMIT = 300


@dataclass(frozen=True)
class Trial:
    """One of an item's trials (gate.prompt.trials): its answer, or why its call failed. ``key``
    (its reuse key) and ``reused_update_id`` say where the answer is kept or came from."""

    decision: str | None
    raw_output: str | None = None
    latency_ms: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None
    key: str | None = None
    reused_update_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The stored form (``prompt_run_item.trials``): outputs and errors bounded."""
        stored: dict[str, Any] = {
            "decision": self.decision,
            "raw_output": (self.raw_output or "")[:TRIAL_OUTPUT_LIMIT] or None,
            "latency_ms": self.latency_ms,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }
        if self.error is not None:
            stored["error"] = self.error[:TRIAL_ERROR_LIMIT]
        if self.reused_update_id is not None:
            stored["reused_update_id"] = self.reused_update_id
        return stored


@dataclass(frozen=True)
class ItemSample:
    item_id: str
    expected_decision: str
    actual_decision: str | None
    verdict: str
    raw_output: str | None
    error: str | None
    wrong_fields: list[dict[str, Any]] | None = None  # a fields decision's (gate.prompt.structured.samples)
    judge: dict[str, Any] | None = None  # a judged item: what the judge said (and, compared with live, live's answer)
    call: dict[str, Any] | None = None  # a tool_call decision: the calls expected and made (gate.report.tool_calls)
    turns: list[dict[str, Any]] | None = None  # a prompt with a history: its last turns, role and text
    input: Any = None  # the item's input as its dataset row has it (the report shows its first lines)


@dataclass(frozen=True)
class UnstableItem:
    """An item whose trials disagree: what each trial answered (``(error)``: its call failed)."""

    item_id: str
    expected_decision: str
    actual_decision: str | None
    verdict: str
    answers: list[str]


@dataclass(frozen=True)
class Price:
    """US dollars per million input and output tokens of a model (gate config ``prices:``)."""

    model: str
    input_per_million: Decimal
    output_per_million: Decimal

    def to_dict(self) -> dict[str, str]:
        return {
            "model": self.model,
            "input_per_million": f"{self.input_per_million:f}",
            "output_per_million": f"{self.output_per_million:f}",
        }


@dataclass(frozen=True)
class FlipSample:
    """An item live answered right and the candidate wrong (or the reverse)."""

    item_id: str
    expected_decision: str
    live_decision: str | None
    candidate_decision: str | None
    candidate_output: str | None
    wrong_fields: list[dict[str, Any]] | None = None  # a fields decision: the candidate's fields that did not match
    input: Any = None  # the item's input as the dataset row has it
    live_output: str | None = None  # live's raw answer (it was right); judge: what the judge said of the candidate's
    judge: dict[str, Any] | None = None
    checks_failed: list[str] | None = None  # a decision with checks: the candidate's checks that failed


@dataclass(frozen=True)
class RunCounts:
    total: int = 0
    pending: int = 0
    match: int = 0
    mismatch: int = 0
    error: int = 0
    stopped: int = 0

    @property
    def scored(self) -> int:
        return self.match + self.mismatch


@dataclass(frozen=True)
class Answer:
    """An answer already paid for, by request key (gate.prompt.request_keys)."""

    request_key: str
    actual_decision: str
    raw_output: str | None
    latency_ms: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    update_id: int
    run_id: int  # the run that paid for it: reused once that run is finished
    trial_of: str | None = None  # trials 2..N: the key of trial 1 (retention keeps them together)


@dataclass(frozen=True)
class WorkerRow:
    id: str
    role: str
    host: str
    pid: int
    started_at: dt.datetime
    heartbeat_at: dt.datetime
    oldest_call_seconds: float | None = None  # age of its oldest model call in flight, at the last heartbeat


@dataclass(frozen=True)
class ApiToken:
    """A bearer token of the HTTP service, as stored: its hash, never the token."""

    id: int
    name: str
    scope: str  # read, submit, admin, feedback or runtime (gate.domain.tokens.ALL_SCOPES)
    token_hash: str
    created_at: dt.datetime
    last_used_at: dt.datetime | None
    revoked_at: dt.datetime | None
    prompts: tuple[str, ...] | None = None  # a runtime token's prompts (None: any other scope)


@dataclass(frozen=True)
class FleetCounts:
    """The fleet at a glance (``store.fleet.fleet_counts``): what the status page and /metrics show."""

    updates: dict[str, int]  # status -> updates
    runs: dict[str, int]  # status -> runs
    items: dict[str, int]  # items of open runs: pending, leased, MATCH, MISMATCH, ERROR
    oldest_pending_seconds: float | None  # the oldest submission no worker has started
    workers: int  # live worker processes
    oldest_heartbeat_seconds: float | None
    calls_saved: dict[str, int] = field(default_factory=dict)  # reason -> model calls not made, ever (gate_counter)
    calls: dict[str, int] = field(default_factory=dict)  # recorded, unrecorded (at most) -> calls of finished runs


@dataclass(frozen=True)
class DatasetPreview:
    """A version's first rows, row count and label counts (most frequent first)."""

    version: DatasetVersion
    first_rows: list[VersionRow]

    @property
    def row_count(self) -> int:
        return self.version.row_count

    @property
    def label_counts(self) -> dict[str, int]:
        return dict(sorted(self.version.labels.items(), key=lambda kv: (-kv[1], kv[0])))


@dataclass(frozen=True)
class Imported:
    version: DatasetVersion
    created: bool  # False: the dataset had a version with this content already


EXAMPLES = 3  # examples of each kind a DataDiff keeps


@dataclass
class DataDiff:
    """How rows differ from a stored version, with the first examples of each kind."""

    added: int = 0
    removed: int = 0
    relabelled: int = 0
    changed: int = 0  # same id and label, other input
    rows: int = 0  # rows of the proposed data
    too_large: int = 0  # not compared: the proposed data has over this many rows
    examples: dict[str, list[str]] = field(
        default_factory=lambda: {"added": [], "removed": [], "relabelled": [], "changed": []}
    )

    @property
    def any(self) -> bool:
        return bool(self.added or self.removed or self.relabelled or self.changed or self.too_large)

    def note(self, kind: str, text: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.examples[kind]) < EXAMPLES:
            self.examples[kind].append(text)

    def summary(self) -> str:
        if self.too_large:
            return f"over {self.too_large:,} rows: too large to compare here"
        parts = [f"{getattr(self, k)} {k}" for k in ("added", "removed", "relabelled", "changed") if getattr(self, k)]
        return ", ".join(parts) or "no change"


@dataclass(frozen=True)
class ServedProcess:
    """One runtime process's last report of what it serves of a prompt (``served_report``): ``version``
    (the live version it loaded: a rollout's canary) and ``stable_version`` (a rollout's other arm)."""

    process_id: str
    prompt_name: str
    host: str
    pid: int
    version: int
    stable_version: int | None
    rollout_id: int | None
    loaded_at: dt.datetime
    last_seen: dt.datetime
    ttl_seconds: float
    reported_by: str
    seen_seconds_ago: float = 0.0  # by the database's clock
    stale: bool = False  # serving an older version than live for longer than 2 × its ttl


@dataclass(frozen=True)
class Rollout:
    """A canary rollout (``prompt_rollout``; ``gate.states.RolloutStatus``): the version an
    update applied (``canary_version``) serves ``config['canary_percent']`` % of calls beside
    ``stable_version`` until the rollout worker decides."""

    id: int
    prompt_name: str
    update_id: int
    canary_version: int
    stable_version: int
    status: str
    config: dict[str, Any]
    started_at: dt.datetime
    decided_at: dt.datetime | None = None
    figures: dict[str, Any] | None = None  # the sequential test's figures at the decision
    reason: str | None = None
