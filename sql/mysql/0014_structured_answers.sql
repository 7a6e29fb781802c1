-- Structured answers (gate/structured): a prompt decided field by field compares each
-- declared field of its answer with the item's expected object. The expected object is
-- kept as canonical JSON in the row's label column (a fields decision knows to read it so;
-- the version's summary says its rows give objects), and what was read of an answer as
-- canonical JSON in actual_decision: both outgrow VARCHAR(128). Label runs group by the
-- first 128 characters (gate/store/items.py: run_breakdown), so finalize's GROUP BY keeps an
-- in-memory temporary table.
ALTER TABLE dataset_row MODIFY expected_decision MEDIUMTEXT NOT NULL,
  ADD COLUMN protected TINYINT NOT NULL DEFAULT 0;
-- Per item, which declared fields were wrong and which the answer lacked: bit i is the
-- i-th field in name order (NULL for a label decision). Finalize and reconcile count
-- fields from these in SQL.
ALTER TABLE prompt_run_item MODIFY expected_decision MEDIUMTEXT NOT NULL, MODIFY actual_decision MEDIUMTEXT NULL,
  ADD COLUMN fields_wrong BIGINT NULL, ADD COLUMN fields_missing BIGINT NULL;
ALTER TABLE answer MODIFY actual_decision MEDIUMTEXT NOT NULL;
