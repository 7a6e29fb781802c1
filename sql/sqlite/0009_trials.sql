-- Trials (gate/trials.py): a prompt with `trials: N` calls each item N times. The item
-- keeps each trial's answer (JSON; NULL for one trial) and whether they disagree.
ALTER TABLE prompt_run_item ADD COLUMN trials TEXT NULL;
ALTER TABLE prompt_run_item ADD COLUMN unstable INTEGER NOT NULL DEFAULT 0;
-- The answers of trials 2..N name the key of trial 1, so retention keeps them together.
ALTER TABLE answer ADD COLUMN trial_of CHAR(64) NULL;
