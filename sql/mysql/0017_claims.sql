-- Faults cost what they should (issue 38). An item's attempts count the calls made for it
-- and recorded (written back), not its claims: a claim lost to a killed worker or a
-- database outage no longer spends one. claims: the claims of the item in a row that ended
-- without a write-back, plus the one in hand (a claim sets it to 1 when the item's last
-- claim was written back or given back, else adds 1): at the claim cap an item whose every
-- claim kills its worker ends ERROR ("lost"), and an item with a lost claim is claimed
-- alone. throttled_since: when the provider first answered the item with a 429 and a
-- Retry-After (backpressure, which spends no attempt), for its time budget.
ALTER TABLE prompt_run_item ADD COLUMN claims INT NOT NULL DEFAULT 0,
  ADD COLUMN throttled_since DATETIME(6) NULL;
