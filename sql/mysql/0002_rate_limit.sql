-- Shared rate-limit budgets. One row per limit: a token bucket refilled from the
-- elapsed time and spent by one conditional UPDATE (gate/store/ratelimits.py).
-- paused_until: a provider's 429 with Retry-After stops every worker until then.
CREATE TABLE IF NOT EXISTS rate_limit_bucket (
  name VARCHAR(191) NOT NULL PRIMARY KEY,
  capacity DOUBLE NOT NULL,
  refill_per_second DOUBLE NOT NULL,
  tokens DOUBLE NOT NULL,
  updated_at DATETIME(6) NOT NULL,
  paused_until DATETIME(6) NOT NULL,
  granted BIGINT NOT NULL DEFAULT 0,
  rate_limited BIGINT NOT NULL DEFAULT 0,
  last_grant INT NOT NULL DEFAULT 0,
  created_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Per run: calls that waited for the budget, how long in total, and 429s from the provider.
CREATE TABLE IF NOT EXISTS rate_limit_usage (
  run_id BIGINT NOT NULL PRIMARY KEY,
  throttled BIGINT NOT NULL DEFAULT 0,
  throttled_ms BIGINT NOT NULL DEFAULT 0,
  rate_limited BIGINT NOT NULL DEFAULT 0,
  updated_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
