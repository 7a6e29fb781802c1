-- prompt-gate schema v1 for MySQL 8 / MariaDB 10.6+ (InnoDB, utf8mb4, DATETIME(6) in UTC).
CREATE TABLE IF NOT EXISTS prompt (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  name VARCHAR(128) NOT NULL,
  version INT NOT NULL,
  config LONGTEXT NOT NULL,
  config_hash CHAR(64) NOT NULL,
  applied_update_id BIGINT NULL,
  updated_at DATETIME(6) NOT NULL,
  UNIQUE KEY uq_prompt_name (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS prompt_version (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  prompt_name VARCHAR(128) NOT NULL,
  version INT NOT NULL,
  config LONGTEXT NOT NULL,
  config_hash CHAR(64) NOT NULL,
  update_id BIGINT NULL,
  applied_at DATETIME(6) NOT NULL,
  UNIQUE KEY uq_prompt_version (prompt_name, version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS dataset (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  name VARCHAR(128) NOT NULL,
  source_uri TEXT NOT NULL,
  options LONGTEXT NOT NULL,
  created_at DATETIME(6) NOT NULL,
  UNIQUE KEY uq_dataset_name (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS prompt_dataset (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  prompt_name VARCHAR(128) NOT NULL,
  dataset_id BIGINT NOT NULL,
  min_accuracy DECIMAL(10,9) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  UNIQUE KEY uq_prompt_dataset (prompt_name, dataset_id),
  KEY ix_prompt_dataset_dataset (dataset_id),
  CONSTRAINT fk_prompt_dataset_dataset FOREIGN KEY (dataset_id) REFERENCES dataset (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS prompt_update (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  prompt_name VARCHAR(128) NOT NULL,
  mode VARCHAR(8) NOT NULL,
  status VARCHAR(16) NOT NULL,
  candidate_config LONGTEXT NOT NULL,
  candidate_hash CHAR(64) NOT NULL,
  base_version INT NOT NULL,
  source LONGTEXT NOT NULL,
  source_key VARCHAR(255) NOT NULL,
  source_sha VARCHAR(64) NULL,
  reason TEXT NULL,
  created_at DATETIME(6) NOT NULL,
  started_at DATETIME(6) NULL,
  finished_at DATETIME(6) NULL,
  KEY ix_update_status (status, id),
  KEY ix_update_prompt (prompt_name, mode, status),
  KEY ix_update_sha (source_sha)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS prompt_run (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  update_id BIGINT NOT NULL,
  dataset_id BIGINT NOT NULL,
  dataset_name VARCHAR(128) NOT NULL,
  source_uri TEXT NOT NULL,
  source_options LONGTEXT NOT NULL,
  status VARCHAR(16) NOT NULL,
  min_accuracy DECIMAL(10,9) NOT NULL,
  row_count INT NOT NULL DEFAULT 0,
  content_hash CHAR(64) NULL,
  source_version VARCHAR(255) NULL,
  materialize_cursor TEXT NULL,
  materialized_at DATETIME(6) NULL,
  lease_token CHAR(32) NULL,
  lease_until DATETIME(6) NOT NULL,
  attempt INT NOT NULL DEFAULT 0,
  metrics LONGTEXT NULL,
  reason TEXT NULL,
  created_at DATETIME(6) NOT NULL,
  started_at DATETIME(6) NULL,
  finished_at DATETIME(6) NULL,
  KEY ix_run_update (update_id, status),
  KEY ix_run_materialize (status, materialized_at, lease_until),
  KEY ix_run_status (status, id),
  CONSTRAINT fk_run_update FOREIGN KEY (update_id) REFERENCES prompt_update (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS prompt_run_item (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  run_id BIGINT NOT NULL,
  item_id VARCHAR(191) NOT NULL,
  input LONGTEXT NOT NULL,
  expected_decision VARCHAR(128) NOT NULL,
  actual_decision VARCHAR(128) NULL,
  raw_output TEXT NULL,
  verdict VARCHAR(8) NOT NULL DEFAULT 'PENDING',
  attempt INT NOT NULL DEFAULT 0,
  next_attempt_at DATETIME(6) NULL,
  lease_token CHAR(32) NULL,
  lease_until DATETIME(6) NOT NULL DEFAULT '2000-01-01 00:00:00',
  latency_ms INT NULL,
  prompt_tokens INT NULL,
  completion_tokens INT NULL,
  error TEXT NULL,
  UNIQUE KEY uq_item (run_id, item_id),
  KEY ix_item_ready (run_id, verdict, lease_until)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS worker (
  id VARCHAR(64) NOT NULL PRIMARY KEY,
  role VARCHAR(64) NOT NULL,
  host VARCHAR(255) NOT NULL,
  pid INT NOT NULL,
  started_at DATETIME(6) NOT NULL,
  heartbeat_at DATETIME(6) NOT NULL,
  KEY ix_worker_heartbeat (heartbeat_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
