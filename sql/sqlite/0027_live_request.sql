-- One writer of the live table: rollbacks and canary decisions as requests (see the MySQL
-- migration for the why).
CREATE TABLE IF NOT EXISTS live_request (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  prompt_name VARCHAR(128) NOT NULL,
  kind VARCHAR(16) NOT NULL,
  status VARCHAR(16) NOT NULL,
  seen_version INT NOT NULL,
  target_version INT NOT NULL,
  rollout_id INTEGER NULL,
  decision VARCHAR(16) NULL,
  figures TEXT NULL,
  actor VARCHAR(191) NULL,
  reason TEXT NULL,
  outcome TEXT NULL,
  refusal TEXT NULL,
  requested_at TEXT NOT NULL,
  ended_at TEXT NULL,
  CONSTRAINT uq_live_request_rollout UNIQUE (rollout_id)
);
CREATE INDEX IF NOT EXISTS ix_live_request_status ON live_request (status, id);
