-- Judged runs: what the report shows of an item's judging (see the MySQL migration).
ALTER TABLE prompt_run_item ADD COLUMN judge TEXT NULL;
