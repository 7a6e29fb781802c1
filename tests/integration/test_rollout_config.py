"""The gate config's `rollout:` on both backends: refused in one line naming the field,
shown in a dry run's plan, synced from the default branch only, pinned on an apply-mode
update at submit, and kept when the same sync drops the prompt's optional fields."""

from __future__ import annotations

import pytest
import yaml
from support.canary import gate_config, prompt_spec

from gate import gateconfig
from gate.errors import SpecError
from gate.store.rollouts import update_rollout

ROLLOUT = {"canary_percent": 10, "min_feedback": 400, "max_drop": 0.02, "confidence": 0.95, "max_hours": 48}


def test_a_rollout_is_planned_synced_pinned_at_submit_and_cleared(gate, tmp_path):
    path = gate_config(tmp_path, ROLLOUT)
    plan = gateconfig.diff(gate, path)
    assert "prompt p1: rollout none (live at 100 %) → canary 10 %, min feedback 400, max drop 2 points, " in str(plan)
    gateconfig.sync(gate, path)
    assert gate.rollout_settings() == {"p1": {**ROLLOUT, "canary_percent": 10.0, "max_hours": 48.0}}
    assert not gateconfig.diff(gate, path).changed  # idempotent
    apply_id, check_id = gate.submit(prompt_spec("a"), "apply"), gate.submit(prompt_spec("b"), "check")
    with gate.engine.connect() as conn:
        assert update_rollout(conn, apply_id)["canary_percent"] == 10.0
        assert update_rollout(conn, check_id) is None  # a check goes live nowhere
    gateconfig.sync(gate, gate_config(tmp_path))
    assert gate.rollout_settings() == {}


def test_dropping_a_prompts_optional_fields_keeps_its_rollout(gate, tmp_path):
    """Both live in the prompt's settings row: clearing one must not delete the other (it
    did: the row was deleted when the optional fields went)."""
    gateconfig.sync(gate, gate_config(tmp_path, ROLLOUT, extra={"optional_fields": {"p1": ["tier"]}}))
    assert gate.optional_fields() == {"p1": ["tier"]} and "p1" in gate.rollout_settings()
    gateconfig.sync(gate, gate_config(tmp_path, ROLLOUT))
    assert gate.optional_fields() == {} and "p1" in gate.rollout_settings()


@pytest.mark.parametrize(
    "rollout, says",
    [
        ({**ROLLOUT, "canary_percent": 0}, "rollout.p1.canary_percent: 0 is outside (0, 100)"),
        ({**ROLLOUT, "confidence": 1.5}, "rollout.p1.confidence: 1.5 is outside (0.5, 1)"),
        ({**ROLLOUT, "max_hours": "two days"}, "rollout.p1.max_hours: must be a number"),
        ({**ROLLOUT, "canary": 5}, "rollout.p1.canary: unknown field"),
    ],
)
def test_a_bad_rollout_is_refused_naming_the_field(tmp_path, rollout, says):
    path = gate_config(tmp_path)
    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**data, "rollout": {"p1": rollout}}))
    with pytest.raises(SpecError) as refused:
        gateconfig.load_config(path)
    assert says in str(refused.value), str(refused.value)
