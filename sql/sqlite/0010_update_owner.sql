-- Ownership (issue 23.4): the name of the service token that submitted an update (NULL: the
-- CLI on the database, the operator). A submit token may cancel only its own updates, and
-- check-mode supersede matches (submitted_by, source_key): no token replaces another's.
ALTER TABLE prompt_update ADD COLUMN submitted_by VARCHAR(128) NULL;
