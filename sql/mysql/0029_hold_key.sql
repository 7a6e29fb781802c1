-- A hold keyed on what decides behaviour (issue 48's leftover): prompt_hold.hold_key is the
-- SHA-256 of the held config less its description (gate.prompt.behaviour.behaviour_hash), so an
-- edit of the description alone is still held; NULL: held by its exact config hash only (a
-- hold from before, or one whose config behaves as the version restored).
ALTER TABLE prompt_hold ADD COLUMN hold_key CHAR(64) NULL;
CREATE INDEX ix_prompt_hold_key ON prompt_hold (prompt_name, hold_key);
