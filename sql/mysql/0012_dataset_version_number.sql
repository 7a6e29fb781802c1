-- Dataset versions numbered per dataset (1, 2, 3 …), as people count them: the id of
-- dataset_version is global, so a dataset's first version could read "version 2". The
-- number is given when a version goes READY, under the dataset row's lock, from the
-- dataset's counter (version_numbers: the last number given, never given again, even
-- after prune deleted that version). IMPORTING versions have none yet (NULL).
ALTER TABLE dataset_version ADD COLUMN number INT NULL;
ALTER TABLE dataset ADD COLUMN version_numbers INT NOT NULL DEFAULT 0;
-- Existing versions: numbered in id order per dataset.
UPDATE dataset_version v
  JOIN (SELECT id, ROW_NUMBER() OVER (PARTITION BY dataset_id ORDER BY id) AS n
          FROM dataset_version WHERE status <> 'IMPORTING') r ON r.id = v.id
   SET v.number = r.n;
UPDATE dataset d SET version_numbers = COALESCE((SELECT MAX(v.number) FROM dataset_version v
                                                 WHERE v.dataset_id = d.id), 0);
CREATE UNIQUE INDEX uq_version_number ON dataset_version (dataset_id, number);
