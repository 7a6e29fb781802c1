-- What production serves (see the MySQL migration for the why).
CREATE TABLE IF NOT EXISTS served_report (
  process_id VARCHAR(96) NOT NULL,
  prompt_name VARCHAR(128) NOT NULL,
  host VARCHAR(191) NOT NULL,
  pid INTEGER NOT NULL,
  version INTEGER NOT NULL,
  stable_version INTEGER NULL,
  rollout_id INTEGER NULL,
  loaded_at TEXT NOT NULL,
  last_seen TEXT NOT NULL,
  ttl_seconds FLOAT NOT NULL,
  reported_by VARCHAR(128) NOT NULL,
  PRIMARY KEY (reported_by, process_id, prompt_name)
);
CREATE INDEX IF NOT EXISTS ix_served_prompt ON served_report (prompt_name, last_seen);
CREATE INDEX IF NOT EXISTS ix_served_seen ON served_report (last_seen);
CREATE INDEX IF NOT EXISTS ix_served_reporter ON served_report (reported_by, last_seen);
