-- Which item fields each dataset version's rows have (counted at import; NULL: imported
-- before this migration, counted once at the first submission that pins it).
ALTER TABLE dataset_version ADD COLUMN fields TEXT NULL;
-- Settings of one prompt that the gate config declares: optional_fields (JSON list).
CREATE TABLE IF NOT EXISTS prompt_setting (
  prompt_name VARCHAR(128) NOT NULL PRIMARY KEY,
  optional_fields TEXT NULL,
  updated_at TEXT NOT NULL
);
