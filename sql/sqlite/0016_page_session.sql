-- The status page's sign-in: a session value in the cookie, never the API token (see the
-- MySQL migration for the why).
CREATE TABLE IF NOT EXISTS page_session (
  session_hash CHAR(64) NOT NULL PRIMARY KEY,
  token_id BIGINT NOT NULL,
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_page_session_token ON page_session (token_id, created_at);
CREATE INDEX IF NOT EXISTS ix_page_session_expires ON page_session (expires_at);
