"""A submission's field check tells no token which columns a holdout has (issue 33.6): a
pull request's submit token, gated on a dataset it may read and on a holdout it may not,
gets the same answer for a field only the holdout has as for a field nobody has."""

from __future__ import annotations

import json
import re

from support.cli import run_cli
from support.helpers import RULES, write_rule_rows

from gate.domain import Gate


def prompt_reading(field: str) -> dict:
    return {
        "name": "p1",
        "model": "mock-1",
        "messages": [
            {"role": "system", "content": RULES},
            {"role": "user", "content": "{{ item.text }} {{ item." + field + " }}"},
        ],
    }


def test_a_submit_token_learns_no_holdout_column_from_the_field_check(service, tmp_path):
    """Review: the check refused a template reading a field no row has and accepted one the
    holdout's rows have, so a submit token probed the holdout's columns one submission at a
    time, at no cost (a refusal stages nothing)."""
    holdout = tmp_path / "holdout.csv"
    holdout.write_text(
        "item_id,expected_decision,text,customer_ssn\n" + "".join(f"h{i},no,beta {i},{i:09d}\n" for i in range(6))
    )
    gate = Gate.connect(service.db_url)
    try:
        gate.register_dataset("holdout", str(holdout))  # the operator's: rows for admin only
        gate.register_dataset("repo", str(write_rule_rows(tmp_path / "d.csv", 6)), declared_in="gate.yaml")
        gate.map_dataset("p1", "holdout", "0.5")
        gate.map_dataset("p1", "repo", "0.5")
    finally:
        gate.close()
    with service.client("submit") as ci, service.client("admin") as admin:
        answers = {}
        for field in ("customer_ssn", "no_such_column"):
            refused = ci.post("/v1/updates", json={"prompt": prompt_reading(field)})
            assert refused.status_code == 400, (field, refused.text)
            answers[field] = refused.json()["error"].replace(field, "FIELD")
        assert (
            answers["customer_ssn"]
            == answers["no_such_column"]
            == (
                "the gate cannot evaluate what FIELD changes: no row of the datasets this token may read (repo) has "
                "it (add rows that do, or declare it under optional_fields: p1: in the gate config)"
            )
        )
        assert admin.get("/v1/updates").json() == []  # nothing staged
        assert ci.post("/v1/updates", json={"prompt": prompt_reading("text")}).status_code == 202
        accepted = admin.post("/v1/updates", json={"prompt": prompt_reading("customer_ssn")})
        assert accepted.status_code == 202, accepted.text  # admin reads the holdout: its rows count


def test_a_holdout_runs_field_counts_reach_admin_only(service, tmp_path):
    """Review: the report of an accepted submission said, per field its templates read, how
    many of the holdout's rows have it ("fields read: customer_ssn: 6 of 6 rows"): a submit
    token submitting the same prompt as admin learned the holdout's columns from its report."""
    holdout = tmp_path / "holdout.csv"
    holdout.write_text(
        "item_id,expected_decision,text,note\n" + "".join(f"h{i},no,beta {i},{i % 2}\n" for i in range(6))
    )
    gate = Gate.connect(service.db_url)
    try:
        gate.register_dataset("holdout", str(holdout))
        gate.register_dataset("repo", str(write_rule_rows(tmp_path / "d.csv", 6)), declared_in="gate.yaml")
        gate.map_dataset("p1", "holdout", "0.5")
        gate.map_dataset("p1", "repo", "0.5")
    finally:
        gate.close()
    with service.client("submit") as ci, service.client("admin") as admin:
        submitted = ci.post("/v1/updates", json={"prompt": prompt_reading("text")})
        assert submitted.status_code == 202, submitted.text
        uid = submitted.json()["id"]
        runs = {r["dataset"]: r for r in ci.get(f"/v1/updates/{uid}").json()["runs"]}
        assert runs["holdout"]["fields_read"] is None
        assert "fields" not in (runs["holdout"]["pinned"] or {})
        assert runs["repo"]["fields_read"]  # a repository's dataset: the counts stay
        admin_runs = {r["dataset"]: r for r in admin.get(f"/v1/updates/{uid}").json()["runs"]}
        assert {f["field"]: f["rows"] for f in admin_runs["holdout"]["fields_read"]} == {"text": 6}


# --- a holdout whose rows give expected objects (issue 33 review, findings 1 and 2) -------------

COLUMNS = ("zq_secret_note", "zq_secret_category", "zq_secret_order")  # an input column, two expected fields


def write_field_holdout(path) -> None:
    """Eight rows: an input column only the holdout has, and expected objects whose
    category is one of three secret values (3, 3 and 2 rows)."""
    with path.open("w") as fh:
        for i in range(8):
            expected = {"zq_secret_category": f"SECRETCAT-{i % 3}", "zq_secret_order": f"ORD-{1000 + i}"}
            row = {"item_id": f"fh-{i}", "text": f"order {i} refund", "zq_secret_note": f"n{i}", "expected": expected}
            fh.write(json.dumps(row) + "\n")


def fields_prompt(name: str, fields: dict) -> dict:
    return {
        "name": name,
        "model": "mock-1",
        "messages": [{"role": "user", "content": "{{ item.text }}"}],
        "decision": {"type": "fields", "fields": fields},
    }


def register_field_holdout(service, tmp_path, repo: bool = False) -> None:
    """``fholdout`` from a path of the server's (the operator's), gating prompt ``extract``;
    with ``repo``, ``extract2`` gated on it and on ``frepo``, a file a gate config declares
    (readable by every token), whose rows all expect category "other"."""
    write_field_holdout(tmp_path / "fholdout.jsonl")
    gate = Gate.connect(service.db_url)
    try:
        gate.register_dataset("fholdout", str(tmp_path / "fholdout.jsonl"))
        gate.map_dataset("extract", "fholdout", "0.5")
        if repo:
            with (tmp_path / "frepo.jsonl").open("w") as fh:
                for i in range(4):
                    expected = {"zq_secret_category": "other", "zq_secret_order": f"ORD-{i}"}
                    fh.write(json.dumps({"item_id": f"r{i}", "text": f"repo {i}", "expected": expected}) + "\n")
            gate.register_dataset("frepo", str(tmp_path / "frepo.jsonl"), declared_in="gate.yaml")
            gate.map_dataset("extract2", "fholdout", "0.5")
            gate.map_dataset("extract2", "frepo", "0.5")
    finally:
        gate.close()


def test_a_holdouts_column_names_reach_no_reader_but_admin(service, tmp_path):
    """Review of issue 33: any read token got every column name of a holdout, and how many
    rows have each, from ``/versions``, ``/versions/N`` and ``preview?rows=0``
    (``fields.counts`` and the names under ``fields.expected.fields``); and a submit token's
    refusal listed the holdout's expected fields ("they have ..."). Now a reader who may
    not read the rows gets totals only, and a refusal about a holdout names none of its
    fields; admin still gets both."""
    register_field_holdout(service, tmp_path)
    routes = [f"/v1/datasets/fholdout/{r}" for r in ("versions", "versions/v1", "versions/0", "preview")]
    for scope in ("read", "submit", "admin"):
        with service.client(scope) as reader:
            answers = [reader.get(route, params={"rows": 0}) for route in routes]
        assert [a.status_code for a in answers] == [200] * 4, [a.text for a in answers]
        shown = "".join(a.text for a in answers)
        assert all((c in shown) == (scope == "admin") for c in COLUMNS), (scope, shown[:600])
        fields = answers[0].json()["versions"][0]["fields"]
        assert fields["rows"] == 8  # the totals every reader gets
        if scope != "admin":
            assert "counts" not in fields and fields["expected"] == {"fields": None, "field_count": 2}, fields
    listed = run_cli(
        "dataset",
        "versions",
        "fholdout",
        "--json",
        "--gate-url",
        service.url,
        env={"PROMPTGATE_TOKEN": service.tokens["read"]},
    )
    assert listed.returncode == 0 and not any(c in listed.stdout for c in COLUMNS), listed.stdout + listed.stderr
    misfits = (
        fields_prompt("extract", {"no_such_field": "text"}),  # "its expected objects have no field ..."
        {**fields_prompt("extract", {}), "labels": ["yes", "no"], "decision": None},  # "gives an expected object"
    )
    for prompt in misfits:
        prompt = {k: v for k, v in prompt.items() if v is not None}
        with service.client("submit") as ci, service.client("admin") as admin:
            refused, told = (
                ci.post("/v1/updates", json={"prompt": prompt}),
                admin.post("/v1/updates", json={"prompt": prompt}),
            )
        assert refused.status_code == told.status_code == 400, (refused.text, told.text)
        assert not any(c in refused.text for c in COLUMNS), refused.text
        assert "zq_secret_category" in told.json()["error"], told.text  # admin may read the rows: the detail stays


def test_a_submit_check_tells_no_holdout_value_nor_how_many_rows_expect_it(service, tmp_path):
    """Review of issue 33: the submit check's refusal of a fields decision said how many of
    the holdout's rows expect values none of the labels ("8 row(s) expect one of 3
    value(s)"), so a submit token guessed the holdout's values one free, unstaged
    submission at a time, and learned how many rows expect each. Gated on the holdout
    alone or beside a dataset it may read, every guess now gets the same line: which
    dataset, no count, no value, no field. What is left is one bit per submission (the
    whole rule fits the holdout or not), as docs/security.md says."""
    register_field_holdout(service, tmp_path, repo=True)
    guesses = (["nope"], ["SECRETCAT-0"], ["SECRETCAT-2"], ["SECRETCAT-0", "SECRETCAT-1"], ["zz"])
    with service.client("submit") as ci:
        for prompt_name in ("extract", "extract2"):
            answers = set()
            for guess in guesses:
                fields = {"zq_secret_category": {"type": "label", "labels": [*guess, "other"]}}
                refused = ci.post("/v1/updates", json={"prompt": fields_prompt(prompt_name, fields)})
                assert refused.status_code == 400, refused.text
                answers.add(refused.json()["error"])
            assert len(answers) == 1, (prompt_name, answers)
            (answer,) = answers
            assert "fholdout" in answer and "SECRETCAT" not in answer and not re.search(r"\d", answer), answer
        with service.client("admin") as admin:
            assert admin.get("/v1/updates").json() == []  # nothing staged
        every = {
            "zq_secret_category": {"type": "label", "labels": ["SECRETCAT-0", "SECRETCAT-1", "SECRETCAT-2", "other"]}
        }
        accepted = ci.post("/v1/updates", json={"prompt": fields_prompt("extract2", every)})
        assert accepted.status_code == 202, accepted.text  # the bit that is left: the rule fits
