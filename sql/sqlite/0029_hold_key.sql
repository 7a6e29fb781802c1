-- A hold keyed on what decides behaviour (see the MySQL migration for the why).
ALTER TABLE prompt_hold ADD COLUMN hold_key CHAR(64) NULL;
CREATE INDEX IF NOT EXISTS ix_prompt_hold_key ON prompt_hold (prompt_name, hold_key);
