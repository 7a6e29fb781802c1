-- Early stop and spend caps (gate/settle.py, gate/spend.py).
-- An update pins at submit whether its runs may stop early (full_run = 1: `submit --full`,
-- none may), its spend caps from the gate config's `limits:` and the upper bound of its
-- calls (limits, JSON; NULL: none). calls_reserved and cost_reserved_nanousd count what its
-- calls may have cost, reserved by the executor atomically before each call when a cap is
-- set (US dollars in units of 1e-9, rounded up); cost_in_flight_nanousd is the part held
-- by calls not answered yet (settled to their real cost when they are). stopped: the one stop of the update
-- (JSON: kind early_stop or spend_cap, the run and the figures; NULL: not stopped).
ALTER TABLE prompt_update ADD COLUMN full_run TINYINT NOT NULL DEFAULT 0,
  ADD COLUMN limits LONGTEXT NULL,
  ADD COLUMN calls_reserved BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN cost_reserved_nanousd BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN cost_in_flight_nanousd BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN stopped LONGTEXT NULL;
-- A run stopped before every item was called: early_stop (its verdict was settled),
-- with_update (another run of its update settled it) or spend_cap; NULL: not stopped.
ALTER TABLE prompt_run ADD COLUMN stopped VARCHAR(16) NULL;
-- A run's running counts, kept in each executor write-back's transaction: items written
-- back by verdict (MATCH, MISMATCH, ERROR), expected label, answer ('' for none) and the
-- paired live run's verdict on the same item ('' when none is paired); and the model
-- calls made (verdict 'CALLS'). What early stop decides from without counting the
-- run's items. Each write-back adds to one of 16 stripes (by its claim's token), so
-- concurrent write-backs of one run seldom wait for each other's row; a read sums them.
CREATE TABLE IF NOT EXISTS prompt_run_tally (
  run_id BIGINT NOT NULL,
  stripe SMALLINT NOT NULL,
  verdict VARCHAR(8) NOT NULL,
  expected_decision VARCHAR(128) NOT NULL,
  actual_decision VARCHAR(128) NOT NULL,
  live_verdict VARCHAR(8) NOT NULL,
  n BIGINT NOT NULL,
  PRIMARY KEY (run_id, stripe, verdict, expected_decision, actual_decision, live_verdict)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- The gate config's `limits:` (default branch only): max_calls_per_update,
-- max_cost_per_update_usd (exact decimal text).
CREATE TABLE IF NOT EXISTS gate_limit (
  name VARCHAR(64) NOT NULL PRIMARY KEY,
  value VARCHAR(40) NOT NULL,
  updated_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- Counters that only grow, for /metrics (promptgate_model_calls_saved_total{reason}):
-- added to by finalize as each run ends.
CREATE TABLE IF NOT EXISTS gate_counter (
  name VARCHAR(64) NOT NULL PRIMARY KEY,
  value BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
