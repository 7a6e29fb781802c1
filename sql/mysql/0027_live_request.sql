-- One writer of the live table (issue 47): a person's rollback and a canary's decision are
-- requests, carried out by the reconcile step (gate/domain/live_transition.py) in one
-- transaction with the live row, its history row and its hold. PENDING until carried out
-- (a canary stays CANARY meanwhile), then DONE or REFUSED (a guard failed: `refusal` says
-- which). `seen_version` is the live version the request saw; `target_version` the version
-- whose config goes live (a canary's stable version; the canary itself when promoted). A
-- rollout has at most one request (`rollout_id` unique).
CREATE TABLE IF NOT EXISTS live_request (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  prompt_name VARCHAR(128) NOT NULL,
  kind VARCHAR(16) NOT NULL,
  status VARCHAR(16) NOT NULL,
  seen_version INT NOT NULL,
  target_version INT NOT NULL,
  rollout_id BIGINT NULL,
  decision VARCHAR(16) NULL,
  figures LONGTEXT NULL,
  actor VARCHAR(191) NULL,
  reason TEXT NULL,
  outcome LONGTEXT NULL,
  refusal TEXT NULL,
  requested_at DATETIME(6) NOT NULL,
  ended_at DATETIME(6) NULL,
  UNIQUE KEY uq_live_request_rollout (rollout_id),
  KEY ix_live_request_status (status, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
