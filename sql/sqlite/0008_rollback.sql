-- A live version is made by an update that cleared its bars (kind 'apply', update_id set)
-- or by a rollback that restored an earlier version's config (kind 'rollback': which
-- version it restored, who asked and why). Rows are never updated or deleted: the history.
ALTER TABLE prompt_version ADD COLUMN kind VARCHAR(16) NOT NULL DEFAULT 'apply';
ALTER TABLE prompt_version ADD COLUMN restored_version INT NULL;
ALTER TABLE prompt_version ADD COLUMN actor VARCHAR(191) NULL;
ALTER TABLE prompt_version ADD COLUMN reason TEXT NULL;
