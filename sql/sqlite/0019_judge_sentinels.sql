-- Sentinels: a judged run's sample of its judge's human-labelled items (see the MySQL
-- migration for the why).
CREATE TABLE IF NOT EXISTS prompt_run_sentinel (
  run_id INTEGER NOT NULL,
  sentinel INTEGER NOT NULL,
  ride_position INTEGER NOT NULL,
  item_id VARCHAR(191) NOT NULL,
  input TEXT NOT NULL,
  expected_decision VARCHAR(128) NOT NULL,
  actual_decision VARCHAR(128) NULL,
  raw_output TEXT NULL,
  verdict VARCHAR(8) NOT NULL DEFAULT 'PENDING',
  calls INTEGER NOT NULL DEFAULT 0,
  prompt_tokens BIGINT NULL,
  completion_tokens BIGINT NULL,
  judged_at TEXT NULL,
  PRIMARY KEY (run_id, sentinel)
);
CREATE INDEX IF NOT EXISTS ix_sentinel_ride ON prompt_run_sentinel (run_id, ride_position);
