-- Dataset versions stored in the gate (see the MySQL migration for the why of each part).
CREATE TABLE IF NOT EXISTS dataset_version (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  dataset_id BIGINT NOT NULL,
  status VARCHAR(16) NOT NULL,
  content_hash CHAR(64) NULL,
  row_count INT NOT NULL DEFAULT 0,
  labels TEXT NULL,
  source_uri TEXT NOT NULL,
  source_options TEXT NOT NULL,
  source_version VARCHAR(255) NULL,
  created_at TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS uq_version_content ON dataset_version (dataset_id, content_hash);
CREATE INDEX IF NOT EXISTS ix_version_created ON dataset_version (status, created_at);

CREATE TABLE IF NOT EXISTS dataset_row (
  version_id BIGINT NOT NULL,
  position INT NOT NULL,
  item_id VARCHAR(191) NOT NULL,
  expected_decision VARCHAR(128) NOT NULL,
  input TEXT NOT NULL,
  row_hash CHAR(64) NOT NULL,
  PRIMARY KEY (version_id, position),
  CONSTRAINT uq_dataset_row_item UNIQUE (version_id, item_id)
);

ALTER TABLE dataset ADD COLUMN current_version_id BIGINT NULL;
ALTER TABLE prompt_run ADD COLUMN dataset_version_id BIGINT NULL;
ALTER TABLE prompt_run ADD COLUMN pinned TEXT NULL;
CREATE INDEX IF NOT EXISTS ix_run_version ON prompt_run (dataset_version_id);
ALTER TABLE prompt_update ADD COLUMN reuse INT NOT NULL DEFAULT 1;

-- SQLite changes a column's constraints by rebuilding the table.
CREATE TABLE prompt_run_item_v4 (
  run_id BIGINT NOT NULL,
  position BIGINT NOT NULL,
  item_id VARCHAR(191) NOT NULL,
  input TEXT NULL,
  expected_decision VARCHAR(128) NOT NULL,
  actual_decision VARCHAR(128) NULL,
  raw_output TEXT NULL,
  verdict VARCHAR(8) NOT NULL DEFAULT 'PENDING',
  attempt INT NOT NULL DEFAULT 0,
  next_attempt_at TEXT NULL,
  lease_token CHAR(32) NULL,
  lease_until TEXT NOT NULL DEFAULT '2000-01-01 00:00:00',
  latency_ms INT NULL,
  prompt_tokens INT NULL,
  completion_tokens INT NULL,
  error TEXT NULL,
  answer_key CHAR(64) NULL,
  reused_update_id BIGINT NULL,
  PRIMARY KEY (run_id, position)
);
INSERT INTO prompt_run_item_v4 (run_id, position, item_id, input, expected_decision, actual_decision, raw_output,
  verdict, attempt, next_attempt_at, lease_token, lease_until, latency_ms, prompt_tokens, completion_tokens, error)
  SELECT run_id, id, item_id, input, expected_decision, actual_decision, raw_output, verdict, attempt,
  next_attempt_at, lease_token, lease_until, latency_ms, prompt_tokens, completion_tokens, error FROM prompt_run_item;
DROP TABLE prompt_run_item;
ALTER TABLE prompt_run_item_v4 RENAME TO prompt_run_item;
CREATE INDEX IF NOT EXISTS ix_item_ready ON prompt_run_item (run_id, verdict, lease_until);

CREATE TABLE IF NOT EXISTS answer (
  request_key CHAR(64) NOT NULL PRIMARY KEY,
  actual_decision VARCHAR(128) NOT NULL,
  raw_output TEXT NULL,
  latency_ms INT NULL,
  prompt_tokens INT NULL,
  completion_tokens INT NULL,
  update_id BIGINT NOT NULL,
  run_id BIGINT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_answer_created ON answer (created_at);
