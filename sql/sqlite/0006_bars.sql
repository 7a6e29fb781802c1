-- The bars of a prompt × dataset beyond min_accuracy (JSON: max_broken, min_recall and
-- min_precision per label, max_latency_p95_ms, max_cost_per_1k_items); NULL: none.
ALTER TABLE prompt_dataset ADD COLUMN bars TEXT NULL;

-- A run is the candidate's (the verdict) or a baseline: the live version scored on the
-- same dataset version when it never was, for the comparison. A baseline run evaluates
-- its own config and provider (the live ones at submit) instead of the update's.
ALTER TABLE prompt_run ADD COLUMN role VARCHAR(16) NOT NULL DEFAULT 'candidate';
-- The run a candidate run is compared with (NULL: none): prune keeps it while the
-- candidate's update is open.
ALTER TABLE prompt_run ADD COLUMN baseline_run_id INTEGER NULL;
ALTER TABLE prompt_run ADD COLUMN config TEXT NULL;
ALTER TABLE prompt_run ADD COLUMN provider TEXT NULL;

-- The gate config's price table: US dollars per million input and output tokens of a
-- model (decimal text, exact), for the report's cost and the max_cost_per_1k_items bar.
CREATE TABLE IF NOT EXISTS model_price (
  model VARCHAR(128) NOT NULL PRIMARY KEY,
  input_per_million VARCHAR(40) NOT NULL,
  output_per_million VARCHAR(40) NOT NULL,
  updated_at TEXT NOT NULL
);
