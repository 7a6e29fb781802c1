"""A rollback that sticks (issue 35.3), on MariaDB and SQLite: the config rolled back away
from is held — an apply of the same config (the same config hash) is refused at submit with
one line naming the rollback (who, when, why) — until a submission overrides it, which
releases the hold; a check is never held; `history` shows the hold. Re-running an old push
job re-applied the rolled-back config as a new version 24 s after the rollback."""

from __future__ import annotations

import pytest
from support.helpers import rules_spec, write_rule_rows
from support.migrated import migrated

from gate.errors import IllegalTransition
from gate.states import UpdateStatus
from workers.supervisor import run_until_terminal


def settle(gate, update_id) -> str:
    (report,) = run_until_terminal(gate, [update_id], timeout=60)
    return report.status


def test_a_rolled_back_config_is_held_until_an_override(gate, tmp_path, model):
    gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 4)))
    gate.map_dataset("p1", "d1", "0.5")
    assert settle(gate, gate.submit(rules_spec("p1", "A"), "apply")) == UpdateStatus.APPLIED
    assert settle(gate, gate.submit(rules_spec("p1", "B"), "apply")) == UpdateStatus.APPLIED
    gate.rollback("p1", reason="B mislabels refunds", actor="alice")
    assert gate.live("p1").version == 3

    with pytest.raises(IllegalTransition) as refused:
        gate.submit(rules_spec("p1", "B"), "apply")  # the old push job, re-run
    message = str(refused.value)
    assert message.startswith("prompt p1: v2's config was rolled back by alice at ") and " UTC (v3): " in message
    assert message.endswith(
        "B mislabels refunds; this apply submits that config again: submit it with "
        "--override-rollback (admin) to apply it anyway"
    )
    assert gate.live("p1").version == 3 and len(gate.list_updates(prompt_name="p1")) == 2

    history = gate.history("p1")
    assert [(row["version"], bool(row["hold"])) for row in history] == [(3, False), (2, True), (1, False)]
    assert history[1]["hold"]["actor"] == "alice" and history[1]["hold"]["reason"] == "B mislabels refunds"
    check = gate.submit(rules_spec("p1", "B"), "check")  # a check goes nowhere: never held
    assert settle(gate, check) == UpdateStatus.PASSED
    assert settle(gate, gate.submit(rules_spec("p1", "C"), "apply")) == UpdateStatus.APPLIED  # another config: not held

    override = gate.submit(rules_spec("p1", "B"), "apply", override_rollback=True)
    assert gate.status(override).update.source["override_rollback"] is True
    assert settle(gate, override) == UpdateStatus.APPLIED and gate.live("p1").version == 5
    assert gate.holds("p1") == [] and not any(row["hold"] for row in gate.history("p1"))


def test_a_held_config_stays_held_until_an_override_is_applied_and_no_rollback_makes_it_live(gate, tmp_path, model):
    """The hostile review: an override released the hold at submit, so a cancelled override
    left the config free for the next push job; and a person's rollback to a held version made
    it live and still held. A held config goes live only through an applied override, or a
    person's rollback that names its version (which releases the hold)."""
    gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 4)))
    gate.map_dataset("p1", "d1", "0.5")
    for description in ("A", "B"):
        assert settle(gate, gate.submit(rules_spec("p1", description), "apply")) == UpdateStatus.APPLIED
    gate.rollback("p1", reason="B mislabels refunds", actor="alice")  # v3: A again, B held

    override = gate.submit(rules_spec("p1", "B"), "apply", override_rollback=True)
    gate.cancel(override, "changed our mind")
    assert gate.status(override).update.status == UpdateStatus.CANCELLED
    with pytest.raises(IllegalTransition, match="v2's config was rolled back by alice"):
        gate.submit(rules_spec("p1", "B"), "apply")  # still held: the override was never carried out

    override = gate.submit(rules_spec("p1", "B"), "apply", override_rollback=True)
    assert settle(gate, override) == UpdateStatus.APPLIED and gate.live("p1").version == 4
    assert gate.holds("p1") == []  # released by the override once it was applied

    gate.rollback("p1", reason="B mislabels refunds after all", actor="carol")  # v5: A again, B held again
    gate.rollback("p1", reason="A was worse", actor="dan", to_version=4)  # v6: B, by a person who chose it
    live = gate.live("p1")
    assert live.version == 6 and live.config_hash not in {h.config_hash for h in gate.holds("p1")}


def test_the_service_shows_the_hold_and_keeps_records_and_overrides_to_admin(mysql_url, tmp_path, model):
    """The status page and `history` through the service show the hold; the commit record and
    override_rollback are admin's (a pull request's submit token may do neither); a read token
    reads a record (a release pipeline's)."""
    from support.service_harness import Service

    from gate.domain import Gate

    gate = Gate.connect(migrated(mysql_url), upgrade=True)
    gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 4)))
    gate.map_dataset("p1", "d1", "0.5")
    for description in ("A", "B"):
        assert settle(gate, gate.submit(rules_spec("p1", description), "apply")) == UpdateStatus.APPLIED
    gate.rollback("p1", reason="B <b>mislabels</b> refunds", actor="alice")
    service = Service(mysql_url, tmp_path, "--public-read")
    sha = "ab" * 20
    try:
        page = service.client(None).get("/prompts/p1").text
        assert "held</span>" in page and "rolled back by alice" in page and "B &lt;b&gt;mislabels" in page
        with service.client("submit") as ci, service.client("admin") as admin, service.client("read") as reader:
            history = reader.get("/v1/prompts/p1/history").json()
            assert [bool(row["hold"]) for row in history] == [False, True, False]
            refused = ci.put(f"/v1/commits/{sha}/record", json={"outcome": "nothing"})
            assert refused.status_code == 403 and "it needs admin" in refused.json()["error"]
            override = ci.post(
                "/v1/updates", json={"prompt": rules_spec("p1", "B").to_config(), "override_rollback": True}
            )
            assert override.status_code == 403 and "override_rollback" in override.json()["error"]
            held = admin.post("/v1/updates", json={"prompt": rules_spec("p1", "B").to_config(), "mode": "apply"})
            assert held.status_code == 409 and "v2's config was rolled back by alice" in held.json()["error"]
            assert reader.get(f"/v1/commits/{sha}/record").status_code == 404
            recorded = admin.put(f"/v1/commits/{sha}/record", json={"outcome": "nothing", "repo": "acme/prompts"})
            assert recorded.status_code == 200, recorded.text
            got = reader.get(f"/v1/commits/{sha}/record").json()
            assert (got["outcome"], got["repo"]) == ("nothing", "acme/prompts")
            assert got["recorded_by"].startswith("test-admin-")
    finally:
        service.stop()
        gate.close()
