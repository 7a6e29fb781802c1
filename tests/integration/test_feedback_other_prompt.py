"""A feedback token learns nothing about another prompt's canary from the answer (issue 48's
hostile pass): a call id that verifies under p1's rollout key, sent as an event of another
prompt, was "ignored" when that prompt had no canary in progress (or a newer one) and
"refused" when it had an older one, so one real id probed any prompt name for a canary.
Now such an event is refused whatever the other prompt has; an id of a rollout of the
event's own prompt that was decided since is still "ignored". `promptgate serve` on MariaDB."""

from __future__ import annotations

from support.canary import call_key, minted
from test_feedback_authority import canary  # noqa: F401 (the fixture: p1 v2 in a canary beside v1)


def test_an_id_of_one_prompts_rollout_says_nothing_about_another_prompts(service, canary):  # noqa: F811
    first, second = minted(call_key(service), 2, 2)
    with service.client("feedback") as sender:
        probes = [
            sender.post(
                "/v1/feedback", json={"events": [{"prompt": p, "version": 2, "call_id": first, "correct": True}]}
            )
            for p in ("p9", "zz-no-such-prompt")
        ]
        own = sender.post(
            "/v1/feedback", json={"events": [{"prompt": "p1", "version": 2, "call_id": second, "correct": True}]}
        )
    refused = {"recorded": 0, "duplicates": 0, "ignored": 0, "refused": 1}
    assert [p.json() for p in probes] == [refused, refused], [p.text for p in probes]
    assert own.json() == {"recorded": 1, "duplicates": 0, "ignored": 0, "refused": 0}, own.text
