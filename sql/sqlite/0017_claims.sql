-- An item's claims in a row without a write-back, and its first 429 with a Retry-After
-- (see the MySQL migration for the why).
ALTER TABLE prompt_run_item ADD COLUMN claims INTEGER NOT NULL DEFAULT 0;
ALTER TABLE prompt_run_item ADD COLUMN throttled_since TEXT NULL;
