"""Every SQL statement of prompt-gate. Workers, the service and the CLI call these
functions (``store.claim_items(conn, ...)``) and name these tables (``store.prompt_run``);
none of them builds SQL.

Conventions: a function takes an open ``Connection`` inside the caller's transaction
(the caller owns commit boundaries: ``gate.db.transaction``), every state change is one
conditional UPDATE whose row count is checked, and every write-back of leased work is
guarded by the lease token and ``lease_until > now``. Time is ``db_now()``: the database
server's UTC clock.

Modules, bottom up (each imports only the ones above it; this file imports them all):

* ``schema``: the tables and their column types, ``EPOCH``, ``new_token``.
* ``dialect``: SQL spelled per dialect: ``db_now``, ``seconds_since``, ``least``,
  ``greatest``, ``floor_div``, ``json_text``.
* ``textsql``: the PyMySQL text fast path of the two hot statements (literal escaping,
  multi-row INSERTs, the chunk's result UPDATE).
* one module per domain noun: ``datasets`` (datasets and prompt-dataset bars),
  ``versions`` (a dataset's imported, immutable versions and their rows), ``live``
  (the live ``prompt`` table and its ``prompt_version`` history), ``locks`` (the
  per-prompt lock rows submissions serialize on), ``providers``, ``updates``, ``runs``,
  ``items`` (claimed, leased, written back), ``answers`` (kept for reuse),
  ``item_stats`` (what a run's items add up to), ``stops`` (a run's running counts, the stop
  of an update before all its items are called), ``spend`` (limits, reservations against
  them, counters), ``workers``, ``ratelimits`` (rate-limit
  buckets and usage), ``retention`` (what ``prune`` may delete), ``tokens`` (the HTTP
  service's bearer tokens, as hashes), ``prompt_settings`` (what the gate config declares per
  prompt), ``fleet`` (counts for the status page and /metrics), ``fields`` (the per-field
  figures of a fields decision), ``policy`` (slices, protected and accepted items).
"""

from __future__ import annotations

from .answers import find_answers, reuse_stats, save_answers
from .datasets import (
    delete_dataset,
    delete_mapping,
    ensure_dataset,
    find_dataset,
    get_dataset,
    list_datasets,
    list_mappings,
    upsert_mapping,
)
from .dialect import db_now, seconds_since
from .fields import field_counts, field_flips, label_confusion, structured_breakdown
from .fleet import fleet_counts
from .item_stats import (
    call_stats,
    failing_items,
    flip_counts,
    flipped_items,
    item_attempt_stats,
    run_breakdown,
    run_counts,
)
from .items import (
    claim_items,
    claim_items_from,
    copy_version_page,
    fail_exhausted_items,
    fail_unclaimed_items,
    item_claim_query,
    release_items,
    renew_item_leases,
    write_item_results,
)
from .live import (
    find_live,
    live_providers,
    live_version,
    prompt_history,
    restore_live,
    version_provider,
    write_live,
)
from .locks import ensure_prompt_lock, lock_prompt, prompt_lock
from .policy import flagged_broken, items_by_id, items_by_id_query, slice_counts
from .prices import delete_price, find_price, list_prices, upsert_price
from .prompt_settings import delete_prompt_setting, list_optional_fields, optional_fields, set_optional_fields
from .providers import delete_provider, list_providers, upsert_provider
from .ratelimits import (
    RateBucketState,
    add_rate_limit_usage,
    ensure_rate_bucket,
    pause_rate_bucket,
    rate_bucket_state,
    rate_buckets,
    rate_limit_stats,
    take_rate_tokens,
)
from .retention import (
    count_prunable_answers,
    count_run_items,
    delete_answers,
    delete_run_items,
    lock_prunable_run,
    prunable_answer_keys,
    prunable_runs,
    prunable_versions,
    take_version,
)
from .runs import (
    BASELINE,
    CANDIDATE,
    advance_materialize,
    baseline_run,
    candidate_of_run,
    claim_materialize,
    finalizable_runs,
    finalize_candidates_query,
    finish_materialize,
    get_run,
    insert_run,
    lock_run_query,
    materialize_claim_query,
    page_committed,
    release_run_lease,
    run_has_unscored_items,
    running_runs,
    runs_of_update,
    set_run_metrics,
    transition_run,
)
from .schema import (
    EPOCH,
    Bar,
    JsonText,
    answer,
    api_token,
    dataset,
    dataset_row,
    dataset_version,
    gate_counter,
    gate_limit,
    meta,
    model_price,
    new_token,
    prompt,
    prompt_dataset,
    prompt_run,
    prompt_run_item,
    prompt_run_tally,
    prompt_setting,
    prompt_update,
    prompt_version,
    provider,
    rate_limit_bucket,
    rate_limit_usage,
    worker,
)
from .spend import (
    add_counters,
    delete_limit,
    list_limits,
    read_counters,
    reserve_spend,
    set_limit,
    settle_spend,
    spend_of_update,
)
from .stops import (
    CALLS,
    add_tally,
    count_uncalled,
    delete_tally,
    outcome_counts,
    read_tally,
    run_stopped,
    stop_items,
    stop_update,
    stripe_of,
    update_has_uncalled,
)
from .tokens import find_token_by_hash, insert_token, list_tokens, revoke_token, touch_token
from .trials import count_unstable, trial_call_stats, unstable_items
from .updates import (
    any_open_update,
    cancel_update,
    find_update,
    get_update,
    insert_update,
    list_updates,
    lock_update_owner,
    lock_update_query,
    reconcilable_updates,
    reconcile_candidates_query,
    set_update_limits,
    start_update,
    superseded_updates,
    transition_update,
    update_status,
    update_statuses,
    updates_for_sha,
)
from .versions import (
    DELETING,
    IMPORTING,
    READY,
    create_version,
    delete_version,
    delete_version_rows,
    existing_version_ids,
    find_version_by_content,
    find_version_by_number,
    finish_version,
    get_version,
    insert_version_rows,
    list_versions,
    lock_dataset,
    rows_with_labels,
    set_current_version,
    set_version_fields,
    version_inputs,
    version_keys,
    version_labels,
    version_rows,
    version_status,
)
from .workers import heartbeat_worker, live_workers, prune_workers, register_worker, remove_worker

__all__ = [
    # schema and dialect
    "EPOCH",
    "Bar",
    "JsonText",
    "answer",
    "api_token",
    "model_price",
    "dataset",
    "dataset_row",
    "dataset_version",
    "db_now",
    "meta",
    "new_token",
    "prompt",
    "prompt_dataset",
    "prompt_run",
    "prompt_setting",
    "prompt_run_item",
    "prompt_update",
    "prompt_version",
    "provider",
    "rate_limit_bucket",
    "rate_limit_usage",
    "seconds_since",
    "worker",
    # datasets and bars
    "delete_dataset",
    "delete_mapping",
    "ensure_dataset",
    "find_dataset",
    "get_dataset",
    "list_datasets",
    "list_mappings",
    "upsert_mapping",
    # dataset versions
    "IMPORTING",
    "READY",
    "create_version",
    "delete_version",
    "delete_version_rows",
    "existing_version_ids",
    "find_version_by_content",
    "find_version_by_number",
    "finish_version",
    "get_version",
    "insert_version_rows",
    "list_versions",
    "rows_with_labels",
    "set_current_version",
    "set_version_fields",
    "version_inputs",
    "version_labels",
    "version_rows",
    "lock_dataset",
    "version_keys",
    "version_status",
    "DELETING",
    # retention
    "count_prunable_answers",
    "count_run_items",
    "delete_answers",
    "delete_run_items",
    "prunable_answer_keys",
    "prunable_runs",
    "prunable_versions",
    "take_version",
    # the live table
    "find_live",
    "live_providers",
    "live_version",
    "prompt_history",
    "restore_live",
    "version_provider",
    "write_live",
    # per-prompt locks
    "ensure_prompt_lock",
    "lock_prompt",
    "prompt_lock",
    # updates
    "any_open_update",
    "cancel_update",
    "find_update",
    "get_update",
    "insert_update",
    "list_updates",
    "lock_update_owner",
    "lock_update_query",
    "reconcilable_updates",
    "reconcile_candidates_query",
    "set_update_limits",
    "start_update",
    "superseded_updates",
    "transition_update",
    "update_status",
    "update_statuses",
    "updates_for_sha",
    # the fleet at a glance
    "fleet_counts",
    # the figures of a fields decision, slices and items by id (gate.structured, gate.itempolicy)
    "field_counts",
    "field_flips",
    "label_confusion",
    "structured_breakdown",
    "flagged_broken",
    "items_by_id",
    "items_by_id_query",
    "slice_counts",
    # the service's tokens
    "find_token_by_hash",
    "insert_token",
    "list_tokens",
    "revoke_token",
    "touch_token",
    # runs
    "advance_materialize",
    "candidate_of_run",
    "claim_materialize",
    "finalizable_runs",
    "finalize_candidates_query",
    "finish_materialize",
    "get_run",
    "insert_run",
    "lock_run_query",
    "materialize_claim_query",
    "page_committed",
    "release_run_lease",
    "run_has_unscored_items",
    "running_runs",
    "runs_of_update",
    "transition_run",
    "baseline_run",
    "set_run_metrics",
    "BASELINE",
    "CANDIDATE",
    # items
    "lock_prunable_run",
    "call_stats",
    "flip_counts",
    "flipped_items",
    "delete_price",
    "find_price",
    "list_prices",
    "upsert_price",
    "claim_items",
    "claim_items_from",
    "copy_version_page",
    "fail_exhausted_items",
    "fail_unclaimed_items",
    "failing_items",
    "find_answers",
    "reuse_stats",
    "save_answers",
    "item_attempt_stats",
    "item_claim_query",
    "release_items",
    "renew_item_leases",
    "run_breakdown",
    "run_counts",
    "write_item_results",
    # items' trials
    "count_unstable",
    "trial_call_stats",
    "unstable_items",
    # early stop: running counts, the stop
    "CALLS",
    "add_tally",
    "count_uncalled",
    "delete_tally",
    "outcome_counts",
    "read_tally",
    "run_stopped",
    "stop_items",
    "stop_update",
    "stripe_of",
    "update_has_uncalled",
    "gate_counter",
    "gate_limit",
    "prompt_run_tally",
    # spend: limits, reservations, counters
    "add_counters",
    "delete_limit",
    "list_limits",
    "read_counters",
    "reserve_spend",
    "set_limit",
    "settle_spend",
    "spend_of_update",
    # per-prompt settings
    "delete_prompt_setting",
    "list_optional_fields",
    "optional_fields",
    "set_optional_fields",
    # providers
    "delete_provider",
    "list_providers",
    "upsert_provider",
    # workers
    "heartbeat_worker",
    "live_workers",
    "prune_workers",
    "register_worker",
    "remove_worker",
    # rate limits
    "RateBucketState",
    "add_rate_limit_usage",
    "ensure_rate_bucket",
    "pause_rate_bucket",
    "rate_bucket_state",
    "rate_buckets",
    "rate_limit_stats",
    "take_rate_tokens",
]
