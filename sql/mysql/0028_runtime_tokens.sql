-- Issue 48: runtime tokens scoped to prompts, and call ids bound to what was served.
-- api_token.prompts: a runtime token's prompts (a JSON list; NULL for every other scope).
-- gate_secret: the server's secrets (the call keys' root), written once by the gate itself
-- (INSERT IGNORE of a random value: concurrent first writers agree on the one stored).
-- rollout_source_tally: a rollout's outcomes by who sent them (token, process tag), so the
-- tally read for a decision caps each one's share (store.feedback.read_tally).
ALTER TABLE api_token ADD COLUMN prompts TEXT NULL;
CREATE TABLE IF NOT EXISTS gate_secret (
  name VARCHAR(64) NOT NULL,
  value VARCHAR(128) NOT NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE IF NOT EXISTS rollout_source_tally (
  rollout_id BIGINT NOT NULL,
  token VARCHAR(128) NOT NULL,
  process VARCHAR(16) NOT NULL,
  canary TINYINT NOT NULL,
  n BIGINT NOT NULL,
  correct BIGINT NOT NULL,
  PRIMARY KEY (rollout_id, token, process, canary)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- served_report.counted: 1 when the reporter may run the prompt (a runtime token whose
-- prompts include it, or a runtime on the database); `wait --served` and the stale-runtime
-- alert count only those. A read token's report is kept, not counted.
ALTER TABLE served_report ADD COLUMN counted TINYINT NOT NULL DEFAULT 0;
UPDATE served_report SET counted = 1 WHERE reported_by = 'database';
