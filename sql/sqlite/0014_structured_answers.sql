-- Structured answers (see the MySQL migration for the why). SQLite does not bound
-- VARCHAR, so expected_decision and actual_decision hold canonical JSON as they are.
ALTER TABLE dataset_row ADD COLUMN protected INTEGER NOT NULL DEFAULT 0;
ALTER TABLE prompt_run_item ADD COLUMN fields_wrong BIGINT NULL;
ALTER TABLE prompt_run_item ADD COLUMN fields_missing BIGINT NULL;
