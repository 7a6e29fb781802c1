-- What the Action's push job did for a commit, and the configs a rollback holds (see the
-- MySQL migration for the why).
CREATE TABLE IF NOT EXISTS commit_record (
  sha VARCHAR(64) NOT NULL PRIMARY KEY,
  outcome VARCHAR(16) NOT NULL,
  update_ids TEXT NULL,
  detail TEXT NULL,
  repo VARCHAR(191) NULL,
  ref VARCHAR(191) NULL,
  recorded_by VARCHAR(191) NULL,
  recorded_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS prompt_hold (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  prompt_name VARCHAR(128) NOT NULL,
  config_hash CHAR(64) NOT NULL,
  held_version INT NOT NULL,
  rollback_version INT NOT NULL,
  actor VARCHAR(191) NULL,
  reason TEXT NULL,
  created_at TEXT NOT NULL,
  released_at TEXT NULL,
  released_by VARCHAR(191) NULL
);
CREATE INDEX IF NOT EXISTS ix_prompt_hold_config ON prompt_hold (prompt_name, config_hash);
