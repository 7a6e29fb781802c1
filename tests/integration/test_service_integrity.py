"""Authority through the service (issues 23.3-23.5, 24.3), against a real `promptgate serve` on
MariaDB, the local model server and the real CLI: what a release wait answers for, who may
cancel and supersede whose updates, that answers cannot be cherry-picked by re-running
--no-reuse checks, and that waiting needs only the read scope."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2
from sqlalchemy import select
from support.cli import ROOT, run_cli
from support.helpers import rules_spec, write_rule_rows

from gate.domain import Gate
from gate.prompt.spec import parse_spec
from gate.store.schema import answer, prompt_update
from workers.supervisor import run_until_terminal

SHA = "c" * 40


def weak_spec(name: str = "p1"):
    """A prompt that answers "yes" to everything: half the rule rows wrong."""
    return parse_spec(
        {
            "name": name,
            "model": "mock-1",
            "messages": [
                {"role": "system", "content": "Classify the message.\ndefault: yes"},
                {"role": "user", "content": "{{ item.text }}"},
            ],
        }
    )


def mapped_gate(service, tmp_path: Path, rows: int = 20, bar: str = "0.7") -> Gate:
    gate = Gate.connect(service.db_url)
    gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", rows, wrong_every=5)))
    gate.map_dataset("p1", "d1", bar)  # rules_spec: 80 % (clears); weak_spec: 50 % (rejected)
    return gate


def post(client: httpx2.Client, spec, mode: str = "check", **fields) -> int:
    response = client.post("/v1/updates", json={"prompt": spec.to_config(), "mode": mode, **fields})
    assert response.status_code == 202, response.text
    return response.json()["id"]


def remote_cli(service, *args, scope: str = "read", token: str | None = None):
    return run_cli(
        *args,
        env={
            "PROMPTGATE_URL": service.url,
            "PROMPTGATE_TOKEN": token or service.tokens[scope],
            "PROMPTGATE_DATABASE_URL": "",
        },
    )


# --- 23.3: what a release wait answers for -------------------------------------------------------


def test_a_passing_check_never_answers_for_a_rejected_apply(service, tmp_path, model):
    gate = mapped_gate(service, tmp_path)
    with service.client("admin") as admin, service.client("submit") as ci:
        applied = post(admin, weak_spec(), "apply", sha=SHA)
        (rejected,) = run_until_terminal(gate, [applied], timeout=120)
        assert rejected.status == "REJECTED"
        checked = post(ci, rules_spec(), "check", sha=SHA)  # a submit token's check for the same commit
        (passed,) = run_until_terminal(gate, [checked], timeout=120)
        assert passed.status == "PASSED"

        release = remote_cli(service, "wait", "--sha", SHA, "--timeout", "30")
        assert release.returncode == 1, (release.stdout, release.stderr)
        assert "waiting for its apply-mode updates" in release.stderr and "REJECTED" in release.stdout
        checks = remote_cli(service, "wait", "--sha", SHA, "--mode", "check", "--timeout", "30")
        assert checks.returncode == 0 and "PASSED" in checks.stdout, (checks.stdout, checks.stderr)

        # the API answers the same question: the apply-mode updates, only them
        by_mode = {
            m: [u["id"] for u in admin.get("/v1/updates", params={"sha": SHA, "mode": m}).json()]
            for m in ("auto", "apply", "check")
        }
        assert by_mode == {"auto": [applied], "apply": [applied], "check": [checked]}
        assert [u["id"] for u in admin.get("/v1/updates", params={"sha": SHA}).json()] == [applied, checked]
    gate.close()


def test_a_check_before_the_apply_never_answers_a_release_wait(service, tmp_path, model):
    """Hostile review: with the default mode falling back to checks, a submit token's passing
    check for commit X (its SHA and content the caller's choice), submitted between the
    merge and the push job's apply, made `wait --sha X` exit 0 before the apply existed; the
    apply then ended REJECTED. By default a release wait answers for apply-mode updates only."""
    gate = mapped_gate(service, tmp_path)
    with service.client("admin") as admin, service.client("submit") as ci:
        checked = post(ci, rules_spec(), "check", sha=SHA)
        (passed,) = run_until_terminal(gate, [checked], timeout=120)
        assert passed.status == "PASSED"
        early = remote_cli(service, "wait", "--sha", SHA, "--timeout", "1")
        assert early.returncode == 3 and "no apply-mode update was submitted" in early.stderr, (
            early.stdout,
            early.stderr,
        )
        applied = post(admin, weak_spec(), "apply", sha=SHA)
        (rejected,) = run_until_terminal(gate, [applied], timeout=120)
        assert rejected.status == "REJECTED"
    release = remote_cli(service, "wait", "--sha", SHA, "--timeout", "30")
    assert release.returncode == 1 and "REJECTED" in release.stdout, (release.stdout, release.stderr)
    gate.close()


def test_wait_mode_apply_waits_for_an_apply_to_appear(service, tmp_path, model):
    """A commit with only a check: `--mode apply` does not take it for an answer; it times
    out looking for an apply (exit 3, a timeout, one line), while auto answers for the check and says so."""
    gate = mapped_gate(service, tmp_path)
    with service.client("submit") as ci:
        checked = post(ci, rules_spec(), "check", sha=SHA)
        run_until_terminal(gate, [checked], timeout=120)
    started = time.monotonic()
    strict = remote_cli(service, "wait", "--sha", SHA, "--mode", "apply", "--timeout", "1.5")
    assert strict.returncode == 3 and time.monotonic() - started >= 1.5, (strict.stdout, strict.stderr)
    assert (
        strict.stderr.strip().endswith("answers for its checks)")
        and "no apply-mode update was submitted for commit" in strict.stderr
    )
    auto = remote_cli(service, "wait", "--sha", SHA, "--mode", "auto", "--timeout", "5")
    assert auto.returncode == 0, (auto.stdout, auto.stderr)
    assert "waiting for its check-mode updates (it has no apply-mode update" in auto.stderr
    gate.close()


# --- 23.4: ownership ----------------------------------------------------------------------------


def test_a_submit_token_cannot_cancel_the_admins_update(service, tmp_path, model):
    gate = mapped_gate(service, tmp_path)
    with service.client("admin") as admin, service.client("submit") as ci:
        applied = post(admin, rules_spec(), "apply", sha=SHA)
        refused = ci.post(f"/v1/updates/{applied}/cancel")
        assert refused.status_code == 403, refused.text
        assert "not submitted by this token" in refused.json()["error"]
        cli = remote_cli(service, "cancel", str(applied), scope="submit")
        assert cli.returncode == 2 and "not submitted by this token" in cli.stderr and "Traceback" not in cli.stderr
        assert gate.status(applied).status == "PENDING"

        own = post(ci, rules_spec(), "check", source_key="mine")
        assert ci.post(f"/v1/updates/{own}/cancel").status_code == 200  # its own: yes
        other = post(admin, rules_spec(), "check", source_key="admins")
        assert admin.post(f"/v1/updates/{other}/cancel").status_code == 200  # admin: any
        (ended,) = run_until_terminal(gate, [applied], timeout=120)
        assert ended.status == "APPLIED"
        with gate.engine.connect() as conn:
            owners = dict(conn.execute(select(prompt_update.c.id, prompt_update.c.submitted_by)).all())
        assert owners[applied] == ended.update.source["submitted_by"] and owners[applied].startswith("test-admin-")
        assert owners[own].startswith("test-submit-")
    gate.close()


def test_tokens_never_supersede_each_others_checks(service, tmp_path):
    gate = mapped_gate(service, tmp_path)
    other = gate.create_token("other-ci", "submit")
    with (
        service.client("submit") as ci,
        httpx2.Client(base_url=service.url, timeout=30, headers={"Authorization": f"Bearer {other}"}) as ci2,
    ):
        mine, theirs = post(ci, rules_spec(), source_key="pr-1"), post(ci2, rules_spec(), source_key="pr-1")
        bare_mine, bare_theirs = post(ci, rules_spec()), post(ci2, rules_spec())  # no key at all
        assert {i: gate.status(i).status for i in (mine, theirs, bare_mine, bare_theirs)} == dict.fromkeys(
            (mine, theirs, bare_mine, bare_theirs), "PENDING"
        )
        newer = post(ci, rules_spec(), source_key="pr-1")  # the same token's newer check still wins
        assert (
            gate.status(mine).status == "CANCELLED"
            and f"superseded by update {newer}" in gate.status(mine).update.reason
        )
        assert gate.status(theirs).status == "PENDING" and gate.status(bare_theirs).status == "PENDING"
    local = gate.submit(rules_spec(), "check", source={"key": "pr-1"})  # the CLI on the database: its own keys
    assert gate.status(newer).status == "PENDING" and gate.status(theirs).status == "PENDING"
    assert gate.submit(rules_spec(), "check", source={"key": "pr-1"}) and gate.status(local).status == "CANCELLED"
    gate.close()


# --- 23.5: answers cannot be cherry-picked ----------------------------------------------------------


def kept_answers(gate: Gate) -> dict:
    with gate.engine.connect() as conn:
        return {
            r.request_key: (r.actual_decision, r.update_id, r.run_id, r.raw_output)
            for r in conn.execute(select(answer))
        }


def test_no_reuse_checks_of_a_flaky_model_change_nothing_the_apply_reuses(service, tmp_path, model, llm):
    rows = 20
    gate = mapped_gate(service, tmp_path, rows=rows, bar="0.1")
    flaky = parse_spec(dict(rules_spec().to_config(), model="mock-flaky-50"))
    with service.client("admin") as admin, service.client("submit") as ci:
        first = post(ci, flaky)  # the first answers the gate obtains: the kept ones
        run_until_terminal(gate, [first], timeout=120)
        before = kept_answers(gate)
        assert len(before) == rows and {u for _, u, _, _ in before.values()} == {first}
        reruns = [post(ci, flaky, reuse=False, source_key=f"try-{n}") for n in range(10)]
        reports = run_until_terminal(gate, reruns, timeout=300)
        assert all(r.runs[0].reused_total == 0 for r in reports)  # --no-reuse did call afresh
        assert kept_answers(gate) == before

        calls = llm.stats()["requests"]
        applied = post(admin, flaky, "apply")
        (report,) = run_until_terminal(gate, [applied], timeout=120)
        assert llm.stats()["requests"] == calls  # every answer reused ...
        assert report.runs[0].reused == {first: rows}  # ... and every one the first's
    gate.close()


# --- 24.3: waiting is reading -----------------------------------------------------------------------


def test_a_read_token_waits_through_the_service(service, tmp_path, model):
    gate = mapped_gate(service, tmp_path)
    with service.client("admin") as admin, service.client("read") as reader:
        applied = post(admin, rules_spec(), "apply", sha=SHA)
        woke: dict = {}

        def long_poll():
            response = reader.get(f"/v1/updates/{applied}/wait", params={"timeout": 90})
            woke.update(at=time.monotonic(), response=response)

        poller = threading.Thread(target=long_poll)
        poller.start()
        env = {
            "PROMPTGATE_URL": service.url,
            "PROMPTGATE_TOKEN": service.tokens["read"],
            "PYTHONPATH": str(ROOT),
            "PROMPTGATE_DATABASE_URL": "",
        }
        release, by_id = (
            subprocess.Popen(
                [sys.executable, "-m", "gate.cli", "wait", *args, "--timeout", "120"],
                env={**os.environ, **env},
                cwd=ROOT,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for args in (("--sha", SHA), (str(applied), "--no-progress"))
        )
        time.sleep(1.5)
        assert "at" not in woke, woke.get("response") and woke["response"].text
        assert release.poll() is None and by_id.poll() is None, (release.communicate(), by_id.communicate())
        (ended,) = run_until_terminal(gate, [applied], timeout=120)
        assert ended.status == "APPLIED"
        poller.join(30)
        out, err = release.communicate(timeout=60)
        id_out, id_err = by_id.communicate(timeout=60)
    assert woke["response"].status_code == 200 and woke["response"].json()["status"] == "APPLIED"
    assert release.returncode == 0, (out, err)
    assert "waiting for its apply-mode updates" in err and "APPLIED" in out
    assert by_id.returncode == 0 and "APPLIED" in id_out, (id_out, id_err)
    gate.close()
