-- Who declared a mapping: the gate config's path (sync manages it) or NULL (the CLI's).
ALTER TABLE prompt_dataset ADD COLUMN declared_in VARCHAR(500) NULL;
