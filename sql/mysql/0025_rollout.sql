-- Canary rollouts (issue 39). The gate config's `rollout:` per prompt is synced into
-- prompt_setting.rollout (the default branch's word, as bars are) and pinned on an
-- apply-mode update at submit (prompt_update.rollout). When such an update is APPLIED,
-- reconcile inserts its prompt_rollout row in the same transaction: the new version is the
-- canary, the previous one stays stable. The rollout worker ends it PROMOTED, ROLLED_BACK or
-- UNDECIDED; an apply or a rollback during it ends it SUPERSEDED (gate/states.py). `config`:
-- {canary_percent, min_feedback, max_drop, confidence, max_hours}; `figures`: the
-- sequential test's counts and interval at the decision.
ALTER TABLE prompt_setting ADD COLUMN rollout LONGTEXT NULL;
ALTER TABLE prompt_update ADD COLUMN rollout LONGTEXT NULL;
CREATE TABLE IF NOT EXISTS prompt_rollout (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  prompt_name VARCHAR(128) NOT NULL,
  update_id BIGINT NOT NULL,
  canary_version INT NOT NULL,
  stable_version INT NOT NULL,
  status VARCHAR(16) NOT NULL,
  config LONGTEXT NOT NULL,
  started_at DATETIME(6) NOT NULL,
  decided_at DATETIME(6) NULL,
  figures LONGTEXT NULL,
  reason TEXT NULL,
  UNIQUE KEY uq_rollout_update (update_id),
  KEY ix_rollout_prompt (prompt_name, status),
  KEY ix_rollout_status (status, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
