"""The gate database's tables as SQLAlchemy Core ``Table``s: every column with its type,
nullability and server default, every primary key, unique key, index and foreign key. The
DDL users run is the migrations' (``sql/<dialect>/NNNN_*.sql``); these tables say the same
thing once, and ``tests/integration/test_schema_truth.py`` holds each dialect's migrated
database to them (so a column added to a migration but not here, or to one dialect only,
fails a test rather than a user). The store's statements name these columns.

Types say what each dialect stores: a SHA-256 is ``CHAR(64)``; a time is ``DATETIME(6)``
on MySQL (microseconds, UTC) and text on SQLite; JSON is ``LONGTEXT`` on MySQL and text
on SQLite; a bar is ``DECIMAL(10,9)`` on MySQL and text on SQLite (``column_types``);
a flag is ``TINYINT`` on MySQL. Also the epoch and the lease token."""

from __future__ import annotations

import secrets

from sqlalchemy import (
    BigInteger,
    Column,
    Double,
    ForeignKeyConstraint,
    Index,
    Integer,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from .column_types import Bar, JsonText, LabelText
from .schema_columns import EPOCH, FLAG, HASH, NEVER_LEASED, NOT_NULL, TOKEN, T, id_column, meta  # noqa: F401 (re-exported)
from .schema_production import (  # noqa: F401 (re-exported: what production serves, rollouts, live requests)
    gate_secret,
    live_request,
    prompt_rollout,
    rollout_feedback,
    rollout_source_tally,
    rollout_tally,
    served_report,
)

prompt = Table(
    "prompt",
    meta,
    id_column(),
    Column("name", String(128), **NOT_NULL),
    Column("version", Integer, **NOT_NULL),
    Column("config", JsonText, **NOT_NULL),
    Column("config_hash", HASH, **NOT_NULL),
    Column("applied_update_id", BigInteger),
    Column("updated_at", T, **NOT_NULL),
    Column("provider", JsonText),  # the declaration its applying update pinned (NULL: the default)
    Column("provider_pinned", FLAG, server_default="0", **NOT_NULL),  # 0: none on record (before migration 15)
    UniqueConstraint("name", name="uq_prompt_name"),
)
prompt_version = Table(
    "prompt_version",
    meta,
    id_column(),
    Column("prompt_name", String(128), **NOT_NULL),
    Column("version", Integer, **NOT_NULL),
    Column("config", JsonText, **NOT_NULL),
    Column("config_hash", HASH, **NOT_NULL),
    Column("update_id", BigInteger),
    Column("applied_at", T, **NOT_NULL),
    Column("kind", String(16), server_default="apply", **NOT_NULL),
    Column("restored_version", Integer),
    Column("actor", String(191)),
    Column("reason", Text),
    Column("provider", JsonText),
    Column("provider_pinned", FLAG, server_default="0", **NOT_NULL),
    UniqueConstraint("prompt_name", "version", name="uq_prompt_version"),
)
prompt_lock = Table("prompt_lock", meta, Column("prompt_name", String(128), primary_key=True))
dataset = Table(
    "dataset",
    meta,
    id_column(),
    Column("name", String(128), **NOT_NULL),
    Column("source_uri", Text, **NOT_NULL),
    Column("options", JsonText, **NOT_NULL),
    Column("created_at", T, **NOT_NULL),
    Column("current_version_id", BigInteger),
    Column("version_numbers", Integer, server_default="0", **NOT_NULL),
    UniqueConstraint("name", name="uq_dataset_name"),
)
dataset_version = Table(
    "dataset_version",
    meta,
    id_column(),
    Column("dataset_id", BigInteger, **NOT_NULL),
    Column("status", String(16), **NOT_NULL),
    Column("content_hash", HASH),
    Column("row_count", Integer, server_default="0", **NOT_NULL),
    Column("labels", JsonText),
    Column("source_uri", Text, **NOT_NULL),
    Column("source_options", JsonText, **NOT_NULL),
    Column("source_version", String(255)),
    Column("created_at", T, **NOT_NULL),
    Column("fields", JsonText),
    Column("number", Integer),
    UniqueConstraint("dataset_id", "content_hash", name="uq_version_content"),
    UniqueConstraint("dataset_id", "number", name="uq_version_number"),
    Index("ix_version_created", "status", "created_at"),
)
dataset_row = Table(
    "dataset_row",
    meta,
    Column("version_id", BigInteger, **NOT_NULL),
    Column("position", Integer, **NOT_NULL),
    Column("item_id", String(191), **NOT_NULL),
    Column("expected_decision", LabelText, **NOT_NULL),
    Column("input", JsonText, **NOT_NULL),
    Column("row_hash", HASH, **NOT_NULL),
    Column("protected", FLAG, server_default="0", **NOT_NULL),
    PrimaryKeyConstraint("version_id", "position"),
    UniqueConstraint("version_id", "item_id", name="uq_dataset_row_item"),
)
prompt_dataset = Table(
    "prompt_dataset",
    meta,
    id_column(),
    Column("prompt_name", String(128), **NOT_NULL),
    Column("dataset_id", BigInteger, **NOT_NULL),
    Column("min_accuracy", Bar, **NOT_NULL),
    Column("created_at", T, **NOT_NULL),
    Column("bars", JsonText),
    Column("declared_in", String(500)),  # the gate config that declared it (NULL: the CLI's, `dataset map`)
    UniqueConstraint("prompt_name", "dataset_id", name="uq_prompt_dataset"),
    Index("ix_prompt_dataset_dataset", "dataset_id"),
    ForeignKeyConstraint(["dataset_id"], ["dataset.id"], name="fk_prompt_dataset_dataset"),
)
prompt_update = Table(
    "prompt_update",
    meta,
    id_column(),
    Column("prompt_name", String(128), **NOT_NULL),
    Column("mode", String(8), **NOT_NULL),
    Column("status", String(16), **NOT_NULL),
    Column("candidate_config", JsonText, **NOT_NULL),
    Column("candidate_hash", HASH, **NOT_NULL),
    Column("base_version", Integer, **NOT_NULL),
    Column("source", JsonText, **NOT_NULL),
    Column("source_key", String(255), **NOT_NULL),
    Column("source_sha", String(64)),
    Column("reason", Text),
    Column("created_at", T, **NOT_NULL),
    Column("started_at", T),
    Column("finished_at", T),
    Column("provider", JsonText),
    Column("reuse", FLAG, server_default="1", **NOT_NULL),
    Column("submitted_by", String(128)),
    Column("full_run", FLAG, server_default="0", **NOT_NULL),
    Column("limits", JsonText),
    Column("calls_reserved", BigInteger, server_default="0", **NOT_NULL),
    Column("cost_reserved_nanousd", BigInteger, server_default="0", **NOT_NULL),
    Column("cost_in_flight_nanousd", BigInteger, server_default="0", **NOT_NULL),
    Column("stopped", JsonText),
    Column("rollout", JsonText),  # the gate config's rollout pinned at submit (apply mode; migration 25)
    Index("ix_update_status", "status", "id"),
    Index("ix_update_prompt", "prompt_name", "mode", "status"),
    Index("ix_update_sha", "source_sha"),
)
prompt_run = Table(
    "prompt_run",
    meta,
    id_column(),
    Column("update_id", BigInteger, **NOT_NULL),
    Column("dataset_id", BigInteger, **NOT_NULL),
    Column("dataset_name", String(128), **NOT_NULL),
    Column("source_uri", Text, **NOT_NULL),
    Column("source_options", JsonText, **NOT_NULL),
    Column("status", String(16), **NOT_NULL),
    Column("min_accuracy", Bar, **NOT_NULL),
    Column("row_count", Integer, server_default="0", **NOT_NULL),
    Column("content_hash", HASH),
    Column("source_version", String(255)),
    Column("materialize_cursor", Text),
    Column("materialized_at", T),
    Column("lease_token", TOKEN),
    Column("lease_until", T, **NOT_NULL),
    Column("attempt", Integer, server_default="0", **NOT_NULL),
    Column("metrics", JsonText),
    Column("reason", Text),
    Column("created_at", T, **NOT_NULL),
    Column("started_at", T),
    Column("finished_at", T),
    Column("dataset_version_id", BigInteger),
    Column("pinned", JsonText),
    Column("role", String(16), server_default="candidate", **NOT_NULL),
    Column("config", JsonText),
    Column("provider", JsonText),
    Column("baseline_run_id", BigInteger),
    Column("stopped", String(16)),
    Index("ix_run_update", "update_id", "status"),
    Index("ix_run_materialize", "status", "materialized_at", "lease_until"),
    Index("ix_run_status", "status", "id"),
    Index("ix_run_version", "dataset_version_id"),
    ForeignKeyConstraint(["update_id"], ["prompt_update.id"], name="fk_run_update"),
)
prompt_run_item = Table(
    "prompt_run_item",
    meta,
    Column("run_id", BigInteger, **NOT_NULL),
    Column("position", BigInteger, **NOT_NULL),
    Column("item_id", String(191), **NOT_NULL),
    Column("input", JsonText),
    Column("expected_decision", LabelText, **NOT_NULL),
    Column("actual_decision", LabelText),
    Column("raw_output", Text),
    Column("verdict", String(8), server_default="PENDING", **NOT_NULL),
    Column("attempt", Integer, server_default="0", **NOT_NULL),
    Column("next_attempt_at", T),
    Column("lease_token", TOKEN),
    Column("lease_until", T, server_default=NEVER_LEASED, **NOT_NULL),
    Column("latency_ms", Integer),
    Column("prompt_tokens", Integer),
    Column("completion_tokens", Integer),
    Column("error", Text),
    Column("answer_key", HASH),
    Column("reused_update_id", BigInteger),
    Column("trials", JsonText),
    Column("unstable", FLAG, server_default="0", **NOT_NULL),
    Column("fields_wrong", BigInteger),
    Column("fields_missing", BigInteger),
    Column("judge", JsonText),  # a judged item's judging (gate.prompt.judge); NULL otherwise
    Column("claims", Integer, server_default="0", **NOT_NULL),
    Column("throttled_since", T),
    PrimaryKeyConstraint("run_id", "position"),
    Index("ix_item_ready", "run_id", "verdict", "lease_until"),
)
prompt_run_sentinel = Table(  # a judged run's sample of its judge's human-labelled items
    "prompt_run_sentinel",
    meta,
    Column("run_id", BigInteger, **NOT_NULL),
    Column("sentinel", Integer, **NOT_NULL),
    Column("ride_position", BigInteger, **NOT_NULL),
    Column("item_id", String(191), **NOT_NULL),
    Column("input", JsonText, **NOT_NULL),
    Column("expected_decision", LabelText, **NOT_NULL),
    Column("actual_decision", LabelText),
    Column("raw_output", Text),
    Column("verdict", String(8), server_default="PENDING", **NOT_NULL),
    Column("calls", Integer, server_default="0", **NOT_NULL),
    Column("prompt_tokens", BigInteger),
    Column("completion_tokens", BigInteger),
    Column("judged_at", T),
    PrimaryKeyConstraint("run_id", "sentinel"),
    Index("ix_sentinel_ride", "run_id", "ride_position"),
)
prompt_run_tally = Table(
    "prompt_run_tally",
    meta,
    Column("run_id", BigInteger, **NOT_NULL),
    Column("stripe", SmallInteger, **NOT_NULL),
    Column("verdict", String(8), **NOT_NULL),
    Column("expected_decision", String(128), **NOT_NULL),
    Column("actual_decision", String(128), **NOT_NULL),
    Column("live_verdict", String(8), **NOT_NULL),
    Column("n", BigInteger, **NOT_NULL),
    PrimaryKeyConstraint("run_id", "stripe", "verdict", "expected_decision", "actual_decision", "live_verdict"),
)
worker = Table(
    "worker",
    meta,
    Column("id", String(64), primary_key=True),
    Column("role", String(64), **NOT_NULL),
    Column("host", String(255), **NOT_NULL),
    Column("pid", Integer, **NOT_NULL),
    Column("started_at", T, **NOT_NULL),
    Column("heartbeat_at", T, **NOT_NULL),
    Column("oldest_call_seconds", Double),
    Index("ix_worker_heartbeat", "heartbeat_at"),
)

rate_limit_bucket = Table(
    "rate_limit_bucket",
    meta,
    Column("name", String(191), primary_key=True),
    Column("capacity", Double, **NOT_NULL),
    Column("refill_per_second", Double, **NOT_NULL),
    Column("tokens", Double, **NOT_NULL),
    Column("updated_at", T, **NOT_NULL),
    Column("paused_until", T, **NOT_NULL),
    Column("granted", BigInteger, server_default="0", **NOT_NULL),
    Column("rate_limited", BigInteger, server_default="0", **NOT_NULL),
    Column("last_grant", Integer, server_default="0", **NOT_NULL),
    Column("created_at", T, **NOT_NULL),
)
answer = Table(
    "answer",
    meta,
    Column("request_key", HASH, primary_key=True),
    Column("actual_decision", LabelText, **NOT_NULL),
    Column("raw_output", Text),
    Column("latency_ms", Integer),
    Column("prompt_tokens", Integer),
    Column("completion_tokens", Integer),
    Column("update_id", BigInteger, **NOT_NULL),
    Column("run_id", BigInteger, **NOT_NULL),
    Column("created_at", T, **NOT_NULL),
    Column("trial_of", HASH),
    Index("ix_answer_created", "created_at"),
)
provider = Table(
    "provider",
    meta,
    Column("name", String(128), primary_key=True),
    Column("base_url", Text, **NOT_NULL),
    Column("api_key_env", String(128)),
    Column("models", JsonText, **NOT_NULL),
    Column("updated_at", T, **NOT_NULL),
)
model_price = Table(
    "model_price",
    meta,
    Column("model", String(128), primary_key=True),
    Column("input_per_million", String(40), **NOT_NULL),
    Column("output_per_million", String(40), **NOT_NULL),
    Column("updated_at", T, **NOT_NULL),
)
prompt_setting = Table(
    "prompt_setting",
    meta,
    Column("prompt_name", String(128), primary_key=True),
    Column("optional_fields", JsonText),
    Column("updated_at", T, **NOT_NULL),
    Column("rollout", JsonText),  # the gate config's rollout: for the prompt (migration 25)
)
gate_limit = Table(
    "gate_limit",
    meta,
    Column("name", String(64), primary_key=True),
    Column("value", String(40), **NOT_NULL),
    Column("updated_at", T, **NOT_NULL),
)
gate_counter = Table(
    "gate_counter", meta, Column("name", String(64), primary_key=True), Column("value", BigInteger, **NOT_NULL)
)
api_token = Table(
    "api_token",
    meta,
    id_column(),
    Column("name", String(128), **NOT_NULL),
    Column("scope", String(16), **NOT_NULL),
    Column("token_hash", HASH, **NOT_NULL),
    Column("created_at", T, **NOT_NULL),
    Column("last_used_at", T),
    Column("revoked_at", T),
    Column("prompts", Text),  # a runtime token's prompts, a JSON list (NULL: not a runtime token)
    UniqueConstraint("name", name="uq_api_token_name"),
    UniqueConstraint("token_hash", name="uq_api_token_hash"),
)
page_session = Table(  # the status page's sign-in: the SHA-256 of the cookie's value, never a token
    "page_session",
    meta,
    Column("session_hash", HASH, primary_key=True),
    Column("token_id", BigInteger, **NOT_NULL),
    Column("created_at", T, **NOT_NULL),
    Column("expires_at", T, **NOT_NULL),
    Index("ix_page_session_token", "token_id", "created_at"),
    Index("ix_page_session_expires", "expires_at"),
)
commit_record = Table(  # what the Action's push job did for a commit (`wait --sha` answers from it)
    "commit_record",
    meta,
    Column("sha", String(64), primary_key=True),
    Column("outcome", String(16), **NOT_NULL),
    Column("update_ids", JsonText),
    Column("detail", Text),
    Column("repo", String(191)),
    Column("ref", String(191)),
    Column("recorded_by", String(191)),
    Column("recorded_at", T, **NOT_NULL),
)
prompt_hold = Table(  # a config a rollback moved away from: its apply is refused until overridden
    "prompt_hold",
    meta,
    id_column(),
    Column("prompt_name", String(128), **NOT_NULL),
    Column("config_hash", HASH, **NOT_NULL),
    Column("held_version", Integer, **NOT_NULL),
    Column("rollback_version", Integer, **NOT_NULL),
    Column("actor", String(191)),
    Column("reason", Text),
    Column("created_at", T, **NOT_NULL),
    Column("released_at", T),
    Column("released_by", String(191)),
    Column("hold_key", HASH),  # gate.prompt.behaviour.behaviour_hash; NULL: by config_hash only
    Index("ix_prompt_hold_config", "prompt_name", "config_hash"),
    Index("ix_prompt_hold_key", "prompt_name", "hold_key"),
)
rate_limit_usage = Table(
    "rate_limit_usage",
    meta,
    Column("run_id", BigInteger, primary_key=True, autoincrement=False),
    Column("throttled", BigInteger, server_default="0", **NOT_NULL),
    Column("throttled_ms", BigInteger, server_default="0", **NOT_NULL),
    Column("rate_limited", BigInteger, server_default="0", **NOT_NULL),
    Column("updated_at", T, **NOT_NULL),
)


def new_token() -> str:
    """A fresh random lease token (32 hex characters: the lease_token columns' width)."""
    return secrets.token_hex(16)
