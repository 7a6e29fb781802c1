"""A check on the bars a pull request proposes (issue 35.1), on MariaDB and SQLite: only in
check mode, only for a prompt the gate does not gate, only on datasets of the gate the
submitter may read (never a holdout), and marked as such in the update's source."""

from __future__ import annotations

import pytest
from support.helpers import rules_spec, write_rule_rows

from gate.errors import UsageError
from gate.states import UpdateStatus
from workers.supervisor import run_until_terminal

BAR = [{"dataset": "d1", "min_accuracy": "0.5", "bars": None}]


def test_proposed_bars_judge_only_an_ungated_prompts_check_on_readable_datasets(gate, tmp_path, model):
    gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 4)))
    gate.map_dataset("gated", "d1", "0.9")
    with pytest.raises(UsageError, match="proposed bars are for a check"):
        gate.submit(rules_spec("new"), "apply", proposed_bars=BAR)
    with pytest.raises(UsageError, match="prompt gated is gated already"):
        gate.submit(rules_spec("gated"), "check", proposed_bars=BAR)
    with pytest.raises(UsageError, match="proposed bar on dataset 'holdout': not a dataset of the gate"):
        gate.submit(rules_spec("new"), "check", proposed_bars=[{"dataset": "holdout", "min_accuracy": "0.5"}])
    with pytest.raises(UsageError, match="proposed bar on dataset 'd1': not a dataset of the gate this submitter"):
        gate.submit(rules_spec("new"), "check", proposed_bars=BAR, may_read=lambda ds: False)  # a holdout
    update_id = gate.submit(rules_spec("new"), "check", proposed_bars=BAR)
    (report,) = run_until_terminal(gate, [update_id], timeout=60)
    assert report.status == UpdateStatus.PASSED and report.update.source["proposed_bars"] is True
    assert [str(r.bar) for r in report.runs] == ["0.5"] and gate.mappings("new") == []
