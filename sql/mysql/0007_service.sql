-- The HTTP service's bearer tokens (`promptgate token create`): only a SHA-256 of each
-- token is kept (the token itself is printed once), with its scope: read (every GET and
-- the status page), submit (read, and submit, cancel, wait), admin (everything).
CREATE TABLE IF NOT EXISTS api_token (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  name VARCHAR(128) NOT NULL,
  scope VARCHAR(16) NOT NULL,
  token_hash CHAR(64) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  last_used_at DATETIME(6) NULL,
  revoked_at DATETIME(6) NULL,
  UNIQUE KEY uq_api_token_name (name),
  UNIQUE KEY uq_api_token_hash (token_hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
