-- Trials (gate/trials.py): a prompt with `trials: N` calls each item N times. The item
-- keeps each trial's answer (JSON: decision, raw_output bounded, latency_ms, tokens, and
-- error or reused_update_id where set; NULL for one trial) and whether they disagree.
ALTER TABLE prompt_run_item ADD COLUMN trials LONGTEXT NULL, ADD COLUMN unstable TINYINT NOT NULL DEFAULT 0;
-- The answers of trials 2..N name the key of trial 1 (the one the item's answer_key holds),
-- so retention keeps an item's trials together (NULL: a one-call answer or trial 1).
ALTER TABLE answer ADD COLUMN trial_of CHAR(64) NULL;
