-- Canary rollouts (see the MySQL migration for the why).
ALTER TABLE prompt_setting ADD COLUMN rollout TEXT NULL;
ALTER TABLE prompt_update ADD COLUMN rollout TEXT NULL;
CREATE TABLE IF NOT EXISTS prompt_rollout (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  prompt_name VARCHAR(128) NOT NULL,
  update_id INTEGER NOT NULL,
  canary_version INTEGER NOT NULL,
  stable_version INTEGER NOT NULL,
  status VARCHAR(16) NOT NULL,
  config TEXT NOT NULL,
  started_at TEXT NOT NULL,
  decided_at TEXT NULL,
  figures TEXT NULL,
  reason TEXT NULL,
  CONSTRAINT uq_rollout_update UNIQUE (update_id)
);
CREATE INDEX IF NOT EXISTS ix_rollout_prompt ON prompt_rollout (prompt_name, status);
CREATE INDEX IF NOT EXISTS ix_rollout_status ON prompt_rollout (status, id);
