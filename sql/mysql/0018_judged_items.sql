-- Judged runs (gate/prompt/judge.py): a generative prompt's item keeps the candidate's
-- answer (raw_output) and the judge's verdict (actual_decision); judge holds what the
-- report shows of the judging (JSON: the judge's answer per order and trial, a comparison's
-- outcome, the calls and tokens of the judge and, for a comparison, of the live version;
-- NULL for an item of a run not judged).
ALTER TABLE prompt_run_item ADD COLUMN judge LONGTEXT NULL;
