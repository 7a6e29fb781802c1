-- The bars of a prompt × dataset beyond min_accuracy (JSON: max_broken, min_recall and
-- min_precision per label, max_latency_p95_ms, max_cost_per_1k_items); NULL: none.
ALTER TABLE prompt_dataset ADD COLUMN bars TEXT NULL;
