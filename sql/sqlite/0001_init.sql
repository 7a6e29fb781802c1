-- prompt-gate schema v1 for SQLite (timestamps as UTC text, bars as decimal text).
CREATE TABLE IF NOT EXISTS prompt (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name VARCHAR(128) NOT NULL,
  version INT NOT NULL,
  config TEXT NOT NULL,
  config_hash CHAR(64) NOT NULL,
  applied_update_id BIGINT NULL,
  updated_at TEXT NOT NULL,
  CONSTRAINT uq_prompt_name UNIQUE (name)
);

CREATE TABLE IF NOT EXISTS prompt_version (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  prompt_name VARCHAR(128) NOT NULL,
  version INT NOT NULL,
  config TEXT NOT NULL,
  config_hash CHAR(64) NOT NULL,
  update_id BIGINT NULL,
  applied_at TEXT NOT NULL,
  CONSTRAINT uq_prompt_version UNIQUE (prompt_name, version)
);

CREATE TABLE IF NOT EXISTS dataset (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name VARCHAR(128) NOT NULL,
  source_uri TEXT NOT NULL,
  options TEXT NOT NULL,
  created_at TEXT NOT NULL,
  CONSTRAINT uq_dataset_name UNIQUE (name)
);

CREATE TABLE IF NOT EXISTS prompt_dataset (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  prompt_name VARCHAR(128) NOT NULL,
  dataset_id BIGINT NOT NULL,
  min_accuracy TEXT NOT NULL,
  created_at TEXT NOT NULL,
  CONSTRAINT uq_prompt_dataset UNIQUE (prompt_name, dataset_id),
  CONSTRAINT fk_prompt_dataset_dataset FOREIGN KEY (dataset_id) REFERENCES dataset (id)
);

CREATE TABLE IF NOT EXISTS prompt_update (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  prompt_name VARCHAR(128) NOT NULL,
  mode VARCHAR(8) NOT NULL,
  status VARCHAR(16) NOT NULL,
  candidate_config TEXT NOT NULL,
  candidate_hash CHAR(64) NOT NULL,
  base_version INT NOT NULL,
  source TEXT NOT NULL,
  source_key VARCHAR(255) NOT NULL,
  source_sha VARCHAR(64) NULL,
  reason TEXT NULL,
  created_at TEXT NOT NULL,
  started_at TEXT NULL,
  finished_at TEXT NULL
);

CREATE TABLE IF NOT EXISTS prompt_run (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  update_id BIGINT NOT NULL,
  dataset_id BIGINT NOT NULL,
  dataset_name VARCHAR(128) NOT NULL,
  source_uri TEXT NOT NULL,
  source_options TEXT NOT NULL,
  status VARCHAR(16) NOT NULL,
  min_accuracy TEXT NOT NULL,
  row_count INT NOT NULL DEFAULT 0,
  content_hash CHAR(64) NULL,
  source_version VARCHAR(255) NULL,
  materialize_cursor TEXT NULL,
  materialized_at TEXT NULL,
  lease_token CHAR(32) NULL,
  lease_until TEXT NOT NULL,
  attempt INT NOT NULL DEFAULT 0,
  metrics TEXT NULL,
  reason TEXT NULL,
  created_at TEXT NOT NULL,
  started_at TEXT NULL,
  finished_at TEXT NULL,
  CONSTRAINT fk_run_update FOREIGN KEY (update_id) REFERENCES prompt_update (id)
);

CREATE TABLE IF NOT EXISTS prompt_run_item (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id BIGINT NOT NULL,
  item_id VARCHAR(191) NOT NULL,
  input TEXT NOT NULL,
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
  CONSTRAINT uq_item UNIQUE (run_id, item_id)
);

CREATE TABLE IF NOT EXISTS worker (
  id VARCHAR(64) NOT NULL PRIMARY KEY,
  role VARCHAR(64) NOT NULL,
  host VARCHAR(255) NOT NULL,
  pid INT NOT NULL,
  started_at TEXT NOT NULL,
  heartbeat_at TEXT NOT NULL
);

CREATE INDEX IF NOT EXISTS ix_prompt_dataset_dataset ON prompt_dataset (dataset_id);
CREATE INDEX IF NOT EXISTS ix_update_status ON prompt_update (status, id);
CREATE INDEX IF NOT EXISTS ix_update_prompt ON prompt_update (prompt_name, mode, status);
CREATE INDEX IF NOT EXISTS ix_update_sha ON prompt_update (source_sha);
CREATE INDEX IF NOT EXISTS ix_run_update ON prompt_run (update_id, status);
CREATE INDEX IF NOT EXISTS ix_run_materialize ON prompt_run (status, materialized_at, lease_until);
CREATE INDEX IF NOT EXISTS ix_run_status ON prompt_run (status, id);
CREATE INDEX IF NOT EXISTS ix_item_ready ON prompt_run_item (run_id, verdict, lease_until);
CREATE INDEX IF NOT EXISTS ix_worker_heartbeat ON worker (heartbeat_at);
