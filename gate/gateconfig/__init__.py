"""The gate config: one YAML file that declares the datasets and the bars of every gated
prompt, kept in the prompts' repository and synced into the gate from the default branch.

::

    # gate.yaml (sources are relative to this file's folder)
    providers:                     # optional: where prompts that name one send their calls
      azure-east: {base_url: "https://east.example/openai/v1", api_key_env: AZURE_EAST_KEY}
    prices: {gpt-4o-mini: {input: 0.15, output: 0.60}}   # optional: USD per 1M tokens (gate.calls.prices)
    datasets:
      urgency-regression: {source: datasets/urgency-regression.csv}
      urgency-hard: {source: datasets/urgency-hard.jsonl, id_column: id, label_column: label}
    prompts:
      ticket-urgency:
        - {dataset: urgency-regression, min_accuracy: 0.90, max_drop: 2,   # at most 2 points below live
           max_error_rate: 0.02}   # up to 2 % of items unscorable, judged on the rest
        - {dataset: urgency-hard, min_accuracy: 0.80, max_broken: 0, min_recall: {urgent: 0.9},
           slice_by: channel, min_slice_accuracy: 0.75, protected: [urg-hard-03],
           accept_breaks: [{item: urg-hard-11, reason: "the customer says urgent, the text says routine"}]}
    optional_fields:               # optional: item fields a prompt's templates may read
      ticket-urgency: [account_tier]   # although no dataset row has them (else refused at submit)
    limits:                        # optional: what one update may spend (gate.calls.spend_caps)
      max_calls_per_update: 2000
      max_cost_per_update_usd: 5
    rollout:                       # optional: an apply that clears every bar goes live as a canary
      ticket-urgency: {canary_percent: 10, min_feedback: 400, max_drop: 0.02, confidence: 0.95, max_hours: 48}

``load_config`` validates the file (every problem is a SpecError naming the file, the field
and the reason; nothing touches the database). ``diff`` says what a sync would change
without changing anything (a pull request shows it as "takes effect after merge").
``sync`` makes the gate match the file:

* every declared dataset is registered (or re-pointed when its source or columns changed);
  relative file sources resolve against the config file's folder;
* every declared bar is mapped (or its bars changed). Besides ``min_accuracy`` an entry may
  carry ``max_broken``, ``min_recall`` / ``min_precision`` (label → fraction),
  ``max_latency_p95_ms``, ``max_cost_per_1k_items``, ``max_error_rate`` (the share of items
  that may end ERROR, judged on the rest; 0 by default), ``min_field_accuracy`` (field →
  fraction, for a fields decision), ``min_slice_accuracy`` / ``min_slice_items`` (see
  ``gate.verdict.bars``), and what it says of items: ``slice_by``, ``protected`` ids and
  ``accept_breaks`` (see ``gate.verdict.item_policy``); a bar left out of the entry is dropped from
  the mapping. ``sync(..., commit=SHA)`` records the commit with each break the file newly
  accepts (a break accepted before keeps its commit);
* **the file is the whole truth for the bars it manages**: every mapping a gate config
  declared (``prompt_dataset.declared_in``) that the file does not declare is unmapped,
  including those of a prompt the file does not list (such a prompt is no longer gated, and
  a submission of it is refused until a bar is declared again). A mapping added with
  `promptgate dataset map` (the CLI's: ``declared_in`` NULL) is kept apart: a sync leaves
  it alone, and a declaration of the same pair takes it over;
* datasets the file no longer declares stay registered (past runs refer to them) but no
  prompt is gated on them any more; ``diff`` lists them so nobody is surprised;
* every declared provider is registered (or changed), and a registered provider the file
  no longer declares is removed: prompts that name it are refused at submit. Providers
  say where model calls go and which key variable they carry, which is why they live
  here, on the default branch, and never in a prompt file (see ``gate.calls.providers``). Prices
  likewise: every declared one is set (or changed), an undeclared one removed.
* every prompt's ``optional_fields`` are set (stored per prompt, ``prompt_setting``); a
  prompt the file does not list has none. A submission whose templates read a field that
  no row of any mapped dataset has is refused unless it is listed here
  (``gate.domain.admission``): this too is the default branch's word, never a pull
  request's (a pull request shows the change as "takes effect after merge").
* ``limits:`` (``max_calls_per_update``, ``max_cost_per_update_usd``) are set, or removed
  when the file no longer declares them: the spend caps every submission pins
  (``gate.calls.spend_caps``), again only ever the default branch's.
* ``rollout:`` per prompt is set (or cleared): an apply-mode submission pins it, and when
  it clears every bar its version goes live as a canary beside the stable one until the
  rollout worker promotes or rolls it back (``gate.rollout``, ``workers.rollout``).

Sync is idempotent: a second sync of the same file changes nothing and reports nothing.
It calls the domain API one step at a time after the whole file has been validated, so
a database error half-way leaves a partial sync that the next sync completes.
"""

from __future__ import annotations

from .changes import CHANGE_TEXT, Change, SyncResult, redact
from .diff import diff
from .parse import BAR_FIELDS, TOP_FIELDS, BarDecl, DatasetDecl, GateConfig, load_config, parse_config
from .sync import sync, uploads_missing

__all__ = [
    "BAR_FIELDS",
    "CHANGE_TEXT",
    "TOP_FIELDS",
    "BarDecl",
    "Change",
    "DatasetDecl",
    "GateConfig",
    "SyncResult",
    "diff",
    "load_config",
    "parse_config",
    "redact",
    "sync",
    "uploads_missing",
]
