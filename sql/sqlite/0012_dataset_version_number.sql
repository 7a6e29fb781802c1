-- Dataset versions numbered per dataset (see the MySQL migration for the why).
ALTER TABLE dataset_version ADD COLUMN number INT NULL;
ALTER TABLE dataset ADD COLUMN version_numbers INT NOT NULL DEFAULT 0;
UPDATE dataset_version SET number = (SELECT COUNT(*) FROM dataset_version w
                                      WHERE w.dataset_id = dataset_version.dataset_id AND w.id <= dataset_version.id
                                        AND w.status <> 'IMPORTING')
 WHERE status <> 'IMPORTING';
UPDATE dataset SET version_numbers = COALESCE((SELECT MAX(v.number) FROM dataset_version v
                                               WHERE v.dataset_id = dataset.id), 0);
CREATE UNIQUE INDEX IF NOT EXISTS uq_version_number ON dataset_version (dataset_id, number);
