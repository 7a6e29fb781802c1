-- Which item fields each dataset version's rows have (gate/importer.py counts them at
-- import): {"counts": {field: rows having it}, "rows": N, "capped": bool}. NULL: a version
-- imported before this migration; the gate counts it once, at the first submission that
-- pins it, and stores it (gate/service/admission.py).
ALTER TABLE dataset_version ADD COLUMN fields LONGTEXT NULL;
-- Settings of one prompt that the gate config declares (synced from the default branch
-- only), one row per prompt that has any: optional_fields, the item fields its templates
-- may read although no dataset row has them (JSON list of names).
CREATE TABLE IF NOT EXISTS prompt_setting (
  prompt_name VARCHAR(128) NOT NULL PRIMARY KEY,
  optional_fields LONGTEXT NULL,
  updated_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
