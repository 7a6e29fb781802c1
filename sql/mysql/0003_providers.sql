-- Providers: where model calls go and which key variable they carry, declared by the gate
-- config synced from the default branch (gate/providers.py). A prompt file only names one.
CREATE TABLE IF NOT EXISTS provider (
  name VARCHAR(128) NOT NULL PRIMARY KEY,
  base_url TEXT NOT NULL,
  api_key_env VARCHAR(128) NULL,
  models LONGTEXT NOT NULL,
  updated_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The provider declaration an update was submitted with (NULL: the default provider, the
-- workers' OPENAI_BASE_URL): its calls go there, whatever the declarations say later.
ALTER TABLE prompt_update ADD COLUMN provider LONGTEXT NULL;
