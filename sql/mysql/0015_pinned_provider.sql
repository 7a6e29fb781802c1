-- Production calls the provider a live version was evaluated with (issue 33.5): the live
-- row and its history row carry the provider declaration pinned with the update that
-- applied the config (prompt_update.provider; NULL: the default provider), so a later sync
-- that changes the gate config's providers never changes where production's calls go.
-- provider_pinned = 0: a version that went live before this migration with no update on
-- record to take it from (the runtime then resolves today's declaration and logs so once).
ALTER TABLE prompt ADD COLUMN provider LONGTEXT NULL,
  ADD COLUMN provider_pinned TINYINT NOT NULL DEFAULT 0;
ALTER TABLE prompt_version ADD COLUMN provider LONGTEXT NULL,
  ADD COLUMN provider_pinned TINYINT NOT NULL DEFAULT 0;
-- Versions already live: the declaration their update pinned at submit (update rows are
-- never pruned). A rollback's history row names the update of the config it restored.
UPDATE prompt SET provider = (SELECT u.provider FROM prompt_update u WHERE u.id = prompt.applied_update_id),
  provider_pinned = 1
  WHERE applied_update_id IN (SELECT id FROM prompt_update);
UPDATE prompt_version SET provider = (SELECT u.provider FROM prompt_update u WHERE u.id = prompt_version.update_id),
  provider_pinned = 1
  WHERE update_id IN (SELECT id FROM prompt_update);
