-- What the Action's push job did for a commit (issue 35.2): the apply-mode updates it
-- submitted, or that nothing needed gating, or that it could not gate the commit (an
-- ungated or invalid prompt file, a gate config that did not sync). `wait --sha` answers
-- from it for a commit with no apply-mode update. One row per commit; written with an
-- admin token (the push job's), a re-run of the job replaces it.
CREATE TABLE IF NOT EXISTS commit_record (
  sha VARCHAR(64) NOT NULL PRIMARY KEY,
  outcome VARCHAR(16) NOT NULL,
  update_ids LONGTEXT NULL,
  detail TEXT NULL,
  repo VARCHAR(191) NULL,
  ref VARCHAR(191) NULL,
  recorded_by VARCHAR(191) NULL,
  recorded_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- A config a rollback moved away from (issue 35.3): an apply of the same config (the same
-- config hash) is refused at submit, naming the rollback, unless the submission overrides
-- it (admin); the override releases the hold.
CREATE TABLE IF NOT EXISTS prompt_hold (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  prompt_name VARCHAR(128) NOT NULL,
  config_hash CHAR(64) NOT NULL,
  held_version INT NOT NULL,
  rollback_version INT NOT NULL,
  actor VARCHAR(191) NULL,
  reason TEXT NULL,
  created_at DATETIME(6) NOT NULL,
  released_at DATETIME(6) NULL,
  released_by VARCHAR(191) NULL,
  KEY ix_prompt_hold_config (prompt_name, config_hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
