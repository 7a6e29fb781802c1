"""The tables of what production serves, canary rollouts, their feedback and the requests
that change the live row (``gate.store.schema`` re-exports them; the same ``meta``)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Double,
    Index,
    Integer,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from .column_types import JsonText
from .schema_columns import FLAG, NOT_NULL, T, id_column, meta

served_report = Table(  # one runtime process's report of what it serves of one prompt
    "served_report",
    meta,
    Column("process_id", String(96), **NOT_NULL),
    Column("prompt_name", String(128), **NOT_NULL),
    Column("host", String(191), **NOT_NULL),
    Column("pid", Integer, **NOT_NULL),
    Column("version", Integer, **NOT_NULL),
    Column("stable_version", Integer),
    Column("rollout_id", BigInteger),
    Column("loaded_at", T, **NOT_NULL),
    Column("last_seen", T, **NOT_NULL),
    Column("ttl_seconds", Double, **NOT_NULL),
    Column("reported_by", String(128), **NOT_NULL),
    Column("counted", FLAG, nullable=False, server_default="0"),  # the reporter may run the prompt
    PrimaryKeyConstraint("reported_by", "process_id", "prompt_name"),
    Index("ix_served_prompt", "prompt_name", "last_seen"),
    Index("ix_served_seen", "last_seen"),
    Index("ix_served_reporter", "reported_by", "last_seen"),
)
prompt_rollout = Table(  # a canary rollout of an applied update (gate.states.RolloutStatus)
    "prompt_rollout",
    meta,
    id_column(),
    Column("prompt_name", String(128), **NOT_NULL),
    Column("update_id", BigInteger, **NOT_NULL),
    Column("canary_version", Integer, **NOT_NULL),
    Column("stable_version", Integer, **NOT_NULL),
    Column("status", String(16), **NOT_NULL),
    Column("config", JsonText, **NOT_NULL),
    Column("started_at", T, **NOT_NULL),
    Column("decided_at", T),
    Column("figures", JsonText),
    Column("reason", Text),
    UniqueConstraint("update_id", name="uq_rollout_update"),
    Index("ix_rollout_prompt", "prompt_name", "status"),
    Index("ix_rollout_status", "status", "id"),
)
live_request = Table(  # a rollback or a canary's decision, carried out by the reconcile step (migration 27)
    "live_request",
    meta,
    id_column(),
    Column("prompt_name", String(128), **NOT_NULL),
    Column("kind", String(16), **NOT_NULL),
    Column("status", String(16), **NOT_NULL),
    Column("seen_version", Integer, **NOT_NULL),
    Column("target_version", Integer, **NOT_NULL),
    Column("rollout_id", BigInteger),
    Column("decision", String(16)),
    Column("figures", JsonText),
    Column("actor", String(191)),
    Column("reason", Text),
    Column("outcome", JsonText),
    Column("refusal", Text),
    Column("requested_at", T, **NOT_NULL),
    Column("ended_at", T),
    UniqueConstraint("rollout_id", name="uq_live_request_rollout"),
    Index("ix_live_request_status", "status", "id"),
)
rollout_feedback = Table(  # one production outcome of a rollout's call, once per call id
    "rollout_feedback",
    meta,
    Column("rollout_id", BigInteger, **NOT_NULL),
    Column("call_id", String(64), **NOT_NULL),
    Column("canary", FLAG, **NOT_NULL),
    Column("correct", FLAG, **NOT_NULL),
    Column("received_at", T, **NOT_NULL),
    PrimaryKeyConstraint("rollout_id", "call_id"),
)
rollout_tally = Table(  # the running counts the rollout worker decides on (16 stripes)
    "rollout_tally",
    meta,
    Column("rollout_id", BigInteger, **NOT_NULL),
    Column("stripe", SmallInteger, **NOT_NULL),
    Column("canary", FLAG, **NOT_NULL),
    Column("n", BigInteger, **NOT_NULL),
    Column("correct", BigInteger, **NOT_NULL),
    PrimaryKeyConstraint("rollout_id", "stripe", "canary"),
)

rollout_source_tally = Table(  # a rollout's outcomes by sender (token, process tag): the shares capped
    "rollout_source_tally",
    meta,
    Column("rollout_id", BigInteger, **NOT_NULL),
    Column("token", String(128), **NOT_NULL),
    Column("process", String(16), **NOT_NULL),
    Column("canary", FLAG, **NOT_NULL),
    Column("n", BigInteger, **NOT_NULL),
    Column("correct", BigInteger, **NOT_NULL),
    PrimaryKeyConstraint("rollout_id", "token", "process", "canary"),
)
gate_secret = Table(  # the server's secrets (the call keys' root); never printed nor logged
    "gate_secret",
    meta,
    Column("name", String(64), primary_key=True),
    Column("value", String(128), **NOT_NULL),
)
