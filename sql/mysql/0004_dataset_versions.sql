-- Dataset versions stored in the gate: a registered dataset's rows are imported once as an
-- immutable version keyed by its content hash; a run pins the version current at submit
-- and its items are copied from the stored rows, so no run reads a pull request's files.
-- MySQL commits each DDL statement: should this migration stop half-way, running it again
-- skips what is in already (gate/db.py: a duplicate table, column or key, or a key that is
-- gone); so the statements are ordered to be re-runnable, the item table's last.
CREATE TABLE IF NOT EXISTS dataset_version (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  dataset_id BIGINT NOT NULL,
  status VARCHAR(16) NOT NULL,
  content_hash CHAR(64) NULL,
  row_count INT NOT NULL DEFAULT 0,
  labels LONGTEXT NULL,
  source_uri TEXT NOT NULL,
  source_options LONGTEXT NOT NULL,
  source_version VARCHAR(255) NULL,
  created_at DATETIME(6) NOT NULL,
  UNIQUE KEY uq_version_content (dataset_id, content_hash),
  KEY ix_version_created (status, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One row of a version; position orders the rows and pages the copies.
CREATE TABLE IF NOT EXISTS dataset_row (
  version_id BIGINT NOT NULL,
  position INT NOT NULL,
  item_id VARCHAR(191) NOT NULL,
  expected_decision VARCHAR(128) NOT NULL,
  input LONGTEXT NOT NULL,
  row_hash CHAR(64) NOT NULL,
  PRIMARY KEY (version_id, position),
  UNIQUE KEY uq_dataset_row_item (version_id, item_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

ALTER TABLE dataset ADD COLUMN current_version_id BIGINT NULL;

-- A run pins its dataset version and what its verdict stands on (model, config hash,
-- decision rule, labels, call-path version).
ALTER TABLE prompt_run ADD COLUMN dataset_version_id BIGINT NULL, ADD COLUMN pinned LONGTEXT NULL;
CREATE INDEX ix_run_version ON prompt_run (dataset_version_id);

-- Whether the update may reuse answers already paid for (submit --no-reuse: no).
ALTER TABLE prompt_update ADD COLUMN reuse TINYINT NOT NULL DEFAULT 1;

-- Answers already paid for, by request: model, params, rendered messages, decision rule,
-- labels, provider and call-path version (gate/reuse.py). MATCH/MISMATCH answers only.
CREATE TABLE IF NOT EXISTS answer (
  request_key CHAR(64) NOT NULL PRIMARY KEY,
  actual_decision VARCHAR(128) NOT NULL,
  raw_output TEXT NULL,
  latency_ms INT NULL,
  prompt_tokens INT NULL,
  completion_tokens INT NULL,
  update_id BIGINT NOT NULL,
  run_id BIGINT NOT NULL,
  created_at DATETIME(6) NOT NULL,
  KEY ix_answer_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Items point at their stored row (position) instead of copying its input. An item is
-- (run_id, position): that is its primary key, so a materialized row costs two B-trees
-- (this and ix_item_ready) instead of three (a surrogate id, a unique key, the ready
-- index): measured, 88k -> 106k rows/s for INSERT ... SELECT (bench/README.md). The
-- version's item ids are unique already. The request key and, for a reused answer, the
-- update that paid for it.
ALTER TABLE prompt_run_item ADD COLUMN position BIGINT NULL, ADD COLUMN answer_key CHAR(64) NULL,
  ADD COLUMN reused_update_id BIGINT NULL;
UPDATE prompt_run_item SET position = id WHERE position IS NULL;
ALTER TABLE prompt_run_item MODIFY position BIGINT NOT NULL, MODIFY input LONGTEXT NULL, DROP COLUMN id,
  ADD PRIMARY KEY (run_id, position), DROP INDEX uq_item;
