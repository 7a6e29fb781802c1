-- One row per prompt ever submitted. A submission locks its prompt's row (SELECT ... FOR
-- UPDATE) for its transaction, so submissions of one prompt serialize and the newest always
-- sees, and cancels, the older ones (latest wins even for submissions a few ms apart).
CREATE TABLE IF NOT EXISTS prompt_lock (
  prompt_name VARCHAR(128) NOT NULL PRIMARY KEY
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The age in seconds of the worker's oldest model call in flight, written with each
-- heartbeat (NULL: none in flight): a heartbeat proves the process lives, this that its
-- calls move.
ALTER TABLE worker ADD COLUMN oldest_call_seconds DOUBLE NULL;
