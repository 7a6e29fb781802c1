-- Sentinels (gate/verdict/judge_stats.py: drift): a judged run mixes some of its judge's
-- human-labelled items into its judging calls. Each is copied at submit from the row of
-- the dataset version the judge's live version was evaluated on (input, the human's
-- verdict), with the run's item it is judged beside (ride_position); the executor writes
-- what the judge said (guarded: verdict PENDING, in the write-back of that item, under its
-- lease). A run whose judge agrees on too few of them ends ERROR, its update FAILED.
CREATE TABLE IF NOT EXISTS prompt_run_sentinel (
  run_id BIGINT NOT NULL,
  sentinel INT NOT NULL,
  ride_position BIGINT NOT NULL,
  item_id VARCHAR(191) NOT NULL,
  input LONGTEXT NOT NULL,
  expected_decision MEDIUMTEXT NOT NULL,
  actual_decision MEDIUMTEXT NULL,
  raw_output TEXT NULL,
  verdict VARCHAR(8) NOT NULL DEFAULT 'PENDING',
  calls INT NOT NULL DEFAULT 0,
  prompt_tokens BIGINT NULL,
  completion_tokens BIGINT NULL,
  judged_at DATETIME(6) NULL,
  PRIMARY KEY (run_id, sentinel),
  KEY ix_sentinel_ride (run_id, ride_position)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
