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
-- served_report.counted: 1 when the reporter may run the prompt (a runtime token whose
-- prompts include it, or a runtime on the database); `wait --served` and the stale-runtime
-- alert count only those. A read token's report is kept, not counted.
ALTER TABLE served_report ADD COLUMN counted TINYINT NOT NULL DEFAULT 0;
UPDATE served_report SET counted = 1 WHERE reported_by = 'database';
