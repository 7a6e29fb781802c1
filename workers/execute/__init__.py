"""The executor: claiming chunks of ready items, calling the model outside any transaction,
and writing verdicts back under the claim's lease (its ledger, call threads, results,
early stop, spend reservations and per-process metrics)."""
