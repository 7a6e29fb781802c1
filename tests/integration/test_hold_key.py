"""A rollback's free text is one line (its actor and reason: no control character is stored
raw). A hold is keyed on what decides behaviour, not on the exact config (issue 48's
leftover): after a rollback, the rolled-back config with only its description edited is
still held — nothing the model sees changed — while an edit of its parameters is a new
candidate. Through `promptgate serve` on MariaDB (the rollback and the submissions are the
service's), the updates run in process on the local model server."""

from __future__ import annotations

from support.helpers import RULES, write_rule_rows

from gate.domain import Gate
from gate.prompt.spec import parse_spec
from gate.states import UpdateStatus
from workers.supervisor import run_until_terminal


def spec(description: str, temperature: float) -> dict:
    return {
        "name": "p1",
        "model": "mock-1",
        "description": description,
        "params": {"temperature": temperature},
        "messages": [{"role": "system", "content": RULES}, {"role": "user", "content": "{{ item.text }}"}],
    }


def test_a_description_edit_of_a_rolled_back_config_is_still_held(service, tmp_path, model):
    gate = Gate.connect(service.db_url)
    try:
        gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 4)))
        gate.map_dataset("p1", "d1", "0.5")
        for config in (spec("first", 0.0), spec("second", 0.3)):
            (report,) = run_until_terminal(gate, [gate.submit(parse_spec(config), "apply")], timeout=60)
            assert report.status == UpdateStatus.APPLIED, report.update.reason
    finally:
        gate.close()
    with service.client("admin") as admin:
        for bad in ({"actor": "ops\x1b]0;pwned\x07"}, {"reason": "fine\r::warning::forged"}):
            refused = admin.post("/v1/prompts/p1/rollback", json={"reason": "r", "seen_version": 2, **bad})
            assert refused.status_code == 400, refused.text  # control characters: refused, not stored raw
            assert refused.json()["error"].endswith("must be one line of text, without control characters")
        rolled = admin.post("/v1/prompts/p1/rollback", json={"reason": "v2 mislabels refunds", "seen_version": 2})
        assert rolled.status_code == 200 and rolled.json()["held"] is True, rolled.text
        renamed = admin.post("/v1/updates", json={"prompt": spec("second, reworded", 0.3), "mode": "apply"})
        assert renamed.status_code == 409, renamed.text  # the same behaviour under another description
        said = renamed.json()["error"]
        assert said.startswith("prompt p1: v2's config was rolled back by token ") and "--override-rollback" in said
        changed = admin.post("/v1/updates", json={"prompt": spec("second, reworded", 0.2), "mode": "apply"})
        assert changed.status_code == 202, changed.text  # a parameter changed: a new candidate
        history = admin.get("/v1/prompts/p1/history").json()
        assert [(row["version"], bool(row["hold"])) for row in history] == [(3, False), (2, True), (1, False)]


def test_free_text_with_control_characters_is_refused_at_the_route(service):
    """A token's name, a commit record's detail: refused in one line (400), nothing stored."""
    with service.client("admin") as admin:
        answers = [
            admin.post("/v1/tokens", json={"name": "ci\x1b[2Jbot", "scope": "read"}),
            admin.put(f"/v1/commits/{'ab' * 20}/record", json={"outcome": "not-gated", "detail": "x\x07\u202ey"}),
        ]
        assert [a.status_code for a in answers] == [400, 400], [a.text for a in answers]
        assert all("\n" not in a.json()["error"] and "control characters" in a.json()["error"] for a in answers)
        assert "ci\x1b[2Jbot" not in admin.get("/v1/tokens").text
