-- Issue 48: runtime tokens scoped to prompts, call ids bound to what was served (see the
-- MySQL migration for the why).
ALTER TABLE api_token ADD COLUMN prompts TEXT NULL;
CREATE TABLE IF NOT EXISTS gate_secret (
  name VARCHAR(64) NOT NULL PRIMARY KEY,
  value VARCHAR(128) NOT NULL
);
CREATE TABLE IF NOT EXISTS rollout_source_tally (
  rollout_id INTEGER NOT NULL,
  token VARCHAR(128) NOT NULL,
  process VARCHAR(16) NOT NULL,
  canary INTEGER NOT NULL,
  n INTEGER NOT NULL,
  correct INTEGER NOT NULL,
  PRIMARY KEY (rollout_id, token, process, canary)
);
