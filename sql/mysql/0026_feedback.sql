-- Production's outcomes for a canary rollout (issue 39): one row per call (idempotent: the
-- same call id twice is one outcome), `canary` 1 when the canary answered it, 0 the stable
-- version. rollout_tally keeps the running counts the rollout worker decides on, added to
-- in the transaction that inserts the rows (16 stripes, so concurrent writers seldom wait
-- on one row): a look costs a read of at most 64 rows, never a count over the feedback.
CREATE TABLE IF NOT EXISTS rollout_feedback (
  rollout_id BIGINT NOT NULL,
  call_id VARCHAR(64) NOT NULL,
  canary TINYINT NOT NULL,
  correct TINYINT NOT NULL,
  received_at DATETIME(6) NOT NULL,
  PRIMARY KEY (rollout_id, call_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE IF NOT EXISTS rollout_tally (
  rollout_id BIGINT NOT NULL,
  stripe SMALLINT NOT NULL,
  canary TINYINT NOT NULL,
  n BIGINT NOT NULL,
  correct BIGINT NOT NULL,
  PRIMARY KEY (rollout_id, stripe, canary)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
