-- Early stop and spend caps (see the MySQL migration for the why).
ALTER TABLE prompt_update ADD COLUMN full_run INTEGER NOT NULL DEFAULT 0;
ALTER TABLE prompt_update ADD COLUMN limits TEXT NULL;
ALTER TABLE prompt_update ADD COLUMN calls_reserved INTEGER NOT NULL DEFAULT 0;
ALTER TABLE prompt_update ADD COLUMN cost_reserved_nanousd INTEGER NOT NULL DEFAULT 0;
ALTER TABLE prompt_update ADD COLUMN cost_in_flight_nanousd INTEGER NOT NULL DEFAULT 0;
ALTER TABLE prompt_update ADD COLUMN stopped TEXT NULL;
ALTER TABLE prompt_run ADD COLUMN stopped VARCHAR(16) NULL;
CREATE TABLE IF NOT EXISTS prompt_run_tally (
  run_id INTEGER NOT NULL,
  stripe INTEGER NOT NULL,
  verdict VARCHAR(8) NOT NULL,
  expected_decision VARCHAR(128) NOT NULL,
  actual_decision VARCHAR(128) NOT NULL,
  live_verdict VARCHAR(8) NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (run_id, stripe, verdict, expected_decision, actual_decision, live_verdict)
);
CREATE TABLE IF NOT EXISTS gate_limit (
  name VARCHAR(64) NOT NULL PRIMARY KEY,
  value VARCHAR(40) NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS gate_counter (
  name VARCHAR(64) NOT NULL PRIMARY KEY,
  value INTEGER NOT NULL
);
