"""The gate database's tables as SQLAlchemy Core ``Table``s, their column types, the epoch
and the lease token. The DDL itself is the migrations' (``sql/``); these tables name the
columns the store's statements use."""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from decimal import Decimal

from sqlalchemy import BigInteger, Column, DateTime, Float, Integer, MetaData, String, Table, Text
from sqlalchemy.types import TypeDecorator


class JsonText(TypeDecorator):
    impl = Text
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    def process_result_value(self, value, dialect):
        return None if value is None else json.loads(value)


class Bar(TypeDecorator):
    """An accuracy bar as an exact Decimal (DECIMAL on MySQL, text on SQLite)."""
    impl = String(32)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return None if value is None else str(Decimal(str(value)))

    def process_result_value(self, value, dialect):
        return None if value is None else Decimal(str(value)).normalize()


meta = MetaData()
T = DateTime()

prompt = Table("prompt", meta,
               Column("id", BigInteger, primary_key=True), Column("name", String(128)),
               Column("version", Integer), Column("config", JsonText), Column("config_hash", String(64)),
               Column("applied_update_id", BigInteger), Column("updated_at", T))
prompt_version = Table("prompt_version", meta,
                       Column("id", BigInteger, primary_key=True), Column("prompt_name", String(128)),
                       Column("version", Integer), Column("config", JsonText), Column("config_hash", String(64)),
                       Column("update_id", BigInteger), Column("applied_at", T), Column("kind", String(16)),
                       Column("restored_version", Integer), Column("actor", String(191)), Column("reason", Text))
prompt_lock = Table("prompt_lock", meta, Column("prompt_name", String(128), primary_key=True))
dataset = Table("dataset", meta,
                Column("id", BigInteger, primary_key=True), Column("name", String(128)),
                Column("source_uri", Text), Column("options", JsonText), Column("created_at", T),
                Column("current_version_id", BigInteger), Column("version_numbers", Integer))
dataset_version = Table("dataset_version", meta,
                        Column("id", BigInteger, primary_key=True), Column("dataset_id", BigInteger),
                        Column("status", String(16)), Column("content_hash", String(64)), Column("row_count", Integer),
                        Column("labels", JsonText), Column("source_uri", Text), Column("source_options", JsonText),
                        Column("source_version", String(255)), Column("created_at", T),
                        Column("fields", JsonText), Column("number", Integer))
dataset_row = Table("dataset_row", meta,
                    Column("version_id", BigInteger, primary_key=True), Column("position", Integer, primary_key=True),
                    Column("item_id", String(191)), Column("expected_decision", String(128)),
                    Column("input", JsonText), Column("row_hash", String(64)))
prompt_dataset = Table("prompt_dataset", meta,
                       Column("id", BigInteger, primary_key=True), Column("prompt_name", String(128)),
                       Column("dataset_id", BigInteger), Column("min_accuracy", Bar), Column("created_at", T),
                       Column("bars", JsonText))
prompt_update = Table("prompt_update", meta,
                      Column("id", BigInteger, primary_key=True), Column("prompt_name", String(128)),
                      Column("mode", String(8)), Column("status", String(16)),
                      Column("candidate_config", JsonText), Column("candidate_hash", String(64)),
                      Column("base_version", Integer), Column("source", JsonText),
                      Column("source_key", String(255)), Column("source_sha", String(64)),
                      Column("reason", Text), Column("created_at", T), Column("started_at", T),
                      Column("finished_at", T), Column("provider", JsonText), Column("reuse", Integer),
                      Column("submitted_by", String(128)), Column("full_run", Integer), Column("limits", JsonText),
                      Column("calls_reserved", BigInteger), Column("cost_reserved_nanousd", BigInteger),
                      Column("cost_in_flight_nanousd", BigInteger),
                      Column("stopped", JsonText))
prompt_run = Table("prompt_run", meta,
                   Column("id", BigInteger, primary_key=True), Column("update_id", BigInteger),
                   Column("dataset_id", BigInteger), Column("dataset_name", String(128)),
                   Column("source_uri", Text), Column("source_options", JsonText),
                   Column("status", String(16)), Column("min_accuracy", Bar),
                   Column("row_count", Integer), Column("content_hash", String(64)),
                   Column("source_version", String(255)), Column("materialize_cursor", Text),
                   Column("materialized_at", T), Column("lease_token", String(32)), Column("lease_until", T),
                   Column("attempt", Integer), Column("metrics", JsonText), Column("reason", Text),
                   Column("created_at", T), Column("started_at", T), Column("finished_at", T),
                   Column("dataset_version_id", BigInteger), Column("pinned", JsonText),
                   Column("role", String(16)), Column("config", JsonText), Column("provider", JsonText),
                   Column("baseline_run_id", BigInteger), Column("stopped", String(16)))
prompt_run_item = Table("prompt_run_item", meta,
                        Column("run_id", BigInteger, primary_key=True),
                        Column("position", BigInteger, primary_key=True),
                        Column("item_id", String(191)), Column("input", JsonText),
                        Column("expected_decision", String(128)), Column("actual_decision", String(128)),
                        Column("raw_output", Text), Column("verdict", String(8)), Column("attempt", Integer),
                        Column("next_attempt_at", T), Column("lease_token", String(32)),
                        Column("lease_until", T), Column("latency_ms", Integer),
                        Column("prompt_tokens", Integer), Column("completion_tokens", Integer),
                        Column("error", Text), Column("answer_key", String(64)),
                        Column("reused_update_id", BigInteger), Column("trials", JsonText),
                        Column("unstable", Integer))
prompt_run_tally = Table("prompt_run_tally", meta,
                         Column("run_id", BigInteger, primary_key=True), Column("stripe", Integer, primary_key=True),
                         Column("verdict", String(8), primary_key=True),
                         Column("expected_decision", String(128), primary_key=True),
                         Column("actual_decision", String(128), primary_key=True),
                         Column("live_verdict", String(8), primary_key=True), Column("n", BigInteger))
worker = Table("worker", meta,
               Column("id", String(64), primary_key=True), Column("role", String(32)),
               Column("host", String(255)), Column("pid", Integer), Column("started_at", T),
               Column("heartbeat_at", T), Column("oldest_call_seconds", Float))

rate_limit_bucket = Table("rate_limit_bucket", meta,
                          Column("name", String(191), primary_key=True), Column("capacity", Float),
                          Column("refill_per_second", Float), Column("tokens", Float),
                          Column("updated_at", T), Column("paused_until", T), Column("granted", BigInteger),
                          Column("rate_limited", BigInteger), Column("last_grant", Integer),
                          Column("created_at", T))
answer = Table("answer", meta,
               Column("request_key", String(64), primary_key=True), Column("actual_decision", String(128)),
               Column("raw_output", Text), Column("latency_ms", Integer), Column("prompt_tokens", Integer),
               Column("completion_tokens", Integer), Column("update_id", BigInteger), Column("run_id", BigInteger),
               Column("created_at", T), Column("trial_of", String(64)))
provider = Table("provider", meta,
                 Column("name", String(128), primary_key=True), Column("base_url", Text),
                 Column("api_key_env", String(128)), Column("models", JsonText), Column("updated_at", T))
model_price = Table("model_price", meta,
                    Column("model", String(128), primary_key=True), Column("input_per_million", String(40)),
                    Column("output_per_million", String(40)), Column("updated_at", T))
prompt_setting = Table("prompt_setting", meta,
                       Column("prompt_name", String(128), primary_key=True), Column("optional_fields", JsonText),
                       Column("updated_at", T))
gate_limit = Table("gate_limit", meta,
                   Column("name", String(64), primary_key=True), Column("value", String(40)), Column("updated_at", T))
gate_counter = Table("gate_counter", meta,
                     Column("name", String(64), primary_key=True), Column("value", BigInteger))
api_token = Table("api_token", meta,
                  Column("id", BigInteger, primary_key=True, autoincrement=True), Column("name", String(128)),
                  Column("scope", String(16)), Column("token_hash", String(64)), Column("created_at", T),
                  Column("last_used_at", T), Column("revoked_at", T))
rate_limit_usage = Table("rate_limit_usage", meta,
                         Column("run_id", BigInteger, primary_key=True), Column("throttled", BigInteger),
                         Column("throttled_ms", BigInteger), Column("rate_limited", BigInteger),
                         Column("updated_at", T))

# A time far in the past: "visible now" for new items and released runs, "not paused" for
# a new rate-limit bucket. The one epoch: every other form (a SQL text literal) derives from it.
EPOCH = datetime(2000, 1, 1)


def new_token() -> str:
    """A fresh random lease token (32 hex characters: the lease_token columns' width)."""
    return secrets.token_hex(16)
