"""What the push job's admin token was told reaches no other reader through the commit's
record (review of issue 39's round).

The push job (admin) submits a merged prompt file; a refusal of its decision against a
holdout gives admin the detail a submit token gets withheld ("dataset fholdout: its expected
objects have no field guess (they have zq_secret_category, zq_secret_order)"), and the
Action records that line as the commit's "not gated" detail, which any read token (a release
pipeline's `wait --sha`) read back from ``GET /v1/commits/{sha}/record``."""

from __future__ import annotations

from test_holdout_columns import fields_prompt, register_field_holdout

SHA = "cd" * 20


def test_a_not_gated_records_detail_is_admins(service, tmp_path):
    register_field_holdout(service, tmp_path)
    with service.client("admin") as push_job:
        prompt = fields_prompt("extract", {"guess": {"type": "text"}})
        refused = push_job.post("/v1/updates", json={"prompt": prompt, "mode": "apply", "sha": SHA})
        assert refused.status_code == 400 and "zq_secret_category" in refused.json()["error"]  # admin's detail
        detail = f"prompts/extract.yaml: {refused.json()['error']}"  # as gate/action/gating.py records it
        assert push_job.put(f"/v1/commits/{SHA}/record", json={"outcome": "not-gated", "detail": detail}).is_success
        assert push_job.get(f"/v1/commits/{SHA}/record").json()["detail"] == detail
    for scope in ("read", "submit"):
        with service.client(scope) as reader:
            record = reader.get(f"/v1/commits/{SHA}/record").json()
        assert record["outcome"] == "not-gated" and "zq_secret" not in str(record), (scope, record)
        assert record["detail"].startswith("see the push job's log")
