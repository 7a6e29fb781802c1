-- What production serves (issue 39): each runtime process reports, at most once per its ttl
-- per prompt, the version it serves (and during a canary rollout the stable one beside it).
-- One row per (process, prompt), upserted by each report; `last_seen` says whether the
-- process still reports, `loaded_at` since when it serves that version. `reported_by` (the
-- token that sent it through the service, or 'database') is part of the key: a token
-- reports for its own processes only, never over another's. Pruned by `promptgate prune`.
CREATE TABLE IF NOT EXISTS served_report (
  process_id VARCHAR(96) NOT NULL,
  prompt_name VARCHAR(128) NOT NULL,
  host VARCHAR(191) NOT NULL,
  pid INT NOT NULL,
  version INT NOT NULL,
  stable_version INT NULL,
  rollout_id BIGINT NULL,
  loaded_at DATETIME(6) NOT NULL,
  last_seen DATETIME(6) NOT NULL,
  ttl_seconds DOUBLE NOT NULL,
  reported_by VARCHAR(128) NOT NULL,
  PRIMARY KEY (reported_by, process_id, prompt_name),
  KEY ix_served_prompt (prompt_name, last_seen),
  KEY ix_served_seen (last_seen),
  KEY ix_served_reporter (reported_by, last_seen)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
