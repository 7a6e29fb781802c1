-- One row per prompt ever submitted. A submission locks its prompt's row for its
-- transaction (on SQLite, BEGIN IMMEDIATE serializes the submissions already).
CREATE TABLE IF NOT EXISTS prompt_lock (
  prompt_name VARCHAR(128) NOT NULL PRIMARY KEY
);

-- The age in seconds of the worker's oldest model call in flight, written with each
-- heartbeat (NULL: none in flight).
ALTER TABLE worker ADD COLUMN oldest_call_seconds REAL NULL;
