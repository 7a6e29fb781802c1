-- Production's outcomes for a canary rollout (see the MySQL migration for the why).
CREATE TABLE IF NOT EXISTS rollout_feedback (
  rollout_id INTEGER NOT NULL,
  call_id VARCHAR(64) NOT NULL,
  canary INTEGER NOT NULL,
  correct INTEGER NOT NULL,
  received_at TEXT NOT NULL,
  PRIMARY KEY (rollout_id, call_id)
);
CREATE TABLE IF NOT EXISTS rollout_tally (
  rollout_id INTEGER NOT NULL,
  stripe INTEGER NOT NULL,
  canary INTEGER NOT NULL,
  n INTEGER NOT NULL,
  correct INTEGER NOT NULL,
  PRIMARY KEY (rollout_id, stripe, canary)
);
