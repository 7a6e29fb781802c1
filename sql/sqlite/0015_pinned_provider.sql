-- Production calls the provider a live version was evaluated with (see the MySQL migration
-- for the why): the declaration pinned with the update that applied it (NULL: the default
-- provider); provider_pinned = 0: none on record (the runtime resolves today's).
ALTER TABLE prompt ADD COLUMN provider TEXT NULL;
ALTER TABLE prompt ADD COLUMN provider_pinned INTEGER NOT NULL DEFAULT 0;
ALTER TABLE prompt_version ADD COLUMN provider TEXT NULL;
ALTER TABLE prompt_version ADD COLUMN provider_pinned INTEGER NOT NULL DEFAULT 0;
UPDATE prompt SET provider = (SELECT u.provider FROM prompt_update u WHERE u.id = prompt.applied_update_id),
  provider_pinned = 1
  WHERE applied_update_id IN (SELECT id FROM prompt_update);
UPDATE prompt_version SET provider = (SELECT u.provider FROM prompt_update u WHERE u.id = prompt_version.update_id),
  provider_pinned = 1
  WHERE update_id IN (SELECT id FROM prompt_update);
