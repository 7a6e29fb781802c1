-- Who declared a mapping (issue 35.9): the gate config's path for one a sync made (sync
-- manages those: adds, changes, removes), NULL for one the CLI or the API added (`dataset
-- map`), which a sync leaves alone.
ALTER TABLE prompt_dataset ADD COLUMN declared_in VARCHAR(500) NULL;
