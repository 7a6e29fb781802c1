-- The HTTP service's bearer tokens (`promptgate token create`): only a SHA-256 of each
-- token is kept (the token itself is printed once), with its scope: read (every GET and
-- the status page), submit (read, and submit, cancel, wait), admin (everything).
CREATE TABLE IF NOT EXISTS api_token (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name VARCHAR(128) NOT NULL UNIQUE,
  scope VARCHAR(16) NOT NULL,
  token_hash CHAR(64) NOT NULL UNIQUE,
  created_at TEXT NOT NULL,
  last_used_at TEXT NULL,
  revoked_at TEXT NULL
);
