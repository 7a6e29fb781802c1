-- The status page's sign-in (issue 33.6): the cookie holds a session value, never the API
-- token. Only its SHA-256 is kept (a leaked database signs nobody in), with the token it
-- was opened with: a session works while that token is live (not revoked) and until
-- expires_at; /logout deletes it.
CREATE TABLE IF NOT EXISTS page_session (
  session_hash CHAR(64) NOT NULL PRIMARY KEY,
  token_id BIGINT NOT NULL,
  created_at DATETIME(6) NOT NULL,
  expires_at DATETIME(6) NOT NULL,
  KEY ix_page_session_token (token_id, created_at),
  KEY ix_page_session_expires (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
