"""A compared prompt's first version (issue 46.1) on MariaDB with the local model server and
real worker processes: with no live version there is nothing to compare with, so a prompt
whose decision names a judge for its first version (``first: {judge, pass}``) is graded by
it, APPLIED only when its bars clear and REJECTED when they do not; once a version is live
the comparison is used (gate/kinds/first.py)."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator
from support import judged_env
from support.judging import (
    NO_REFUND_REPLIES,
    WEAK_REPLIES,
    live_judge,
    pair_judge_spec,
    reply_spec,
    write_pairs,
    write_tickets,
)

from gate.errors import NotFound
from gate.report.markdown import render_markdown
from gate.report.text import render_text
from gate.schemas import status_schema
from gate.states import UpdateStatus
from workers.supervisor import run_until_terminal

llm = judged_env.llm  # a shared fixture
workers = judged_env.workers  # a shared fixture

FIRST = {"judge": "reply-judge", "pass": ["good"]}


def in_process(gate):
    return lambda update_id: run_until_terminal(gate, [update_id], timeout=60)[0]


def judges(gate, tmp_path) -> None:
    """The graded judge and the comparing judge, each live on its human-labelled dataset."""
    live_judge(gate, tmp_path, in_process(gate))
    gate.register_dataset("pairs", str(write_pairs(tmp_path / "pairs.csv", 60)))
    gate.map_dataset("pair-judge", "pairs", "0.5")
    assert in_process(gate)(gate.submit(pair_judge_spec(), "apply")).status == UpdateStatus.APPLIED


def compared(rules=None, **extra):
    return reply_spec(*([rules] if rules else []), judge="pair-judge", compare="live", **extra)


def test_a_compared_prompts_first_version_is_graded_by_its_first_judge_and_applied_only_when_it_clears(
    mysql_gate, llm, workers, tmp_path
):
    gate = mysql_gate
    judges(gate, tmp_path)
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 30)))
    gate.map_dataset("reply", "tickets", "0.8", bars={"max_loss_rate": 0.05, "sentinels": 0, "early_stop": False})
    workers(gate, llm)
    weak = gate.wait(gate.submit(compared(WEAK_REPLIES, first=FIRST), "apply"), timeout=60)
    assert weak.status == UpdateStatus.REJECTED, weak.update.reason  # a third of the replies pass the graded judge
    assert weak.update.reason == "missed: tickets 33.3% < bar 80%"
    with pytest.raises(NotFound):
        gate.live("reply")
    good = gate.wait(gate.submit(compared(first=FIRST), "apply"), timeout=60)
    assert good.status == UpdateStatus.APPLIED, good.update.reason
    (run,) = good.runs
    graded = {"type": "judge", "judge": "reply-judge", "pass": ["good"], "first_version": True}
    assert graded.items() <= run.pinned["decision"].items()  # the rule it was judged by, marked a first version
    assert run.pinned["judge"]["name"] == "reply-judge" and run.pinned["judge"].get("compare") is None
    assert run.judge["calls"]["judge"]["calls"] > 0 and run.judge.get("pairwise") is None  # graded, not compared
    checks = {c["bar"]: c for c in run.checks}
    assert checks["min_accuracy"]["state"] == "pass" and checks["min_accuracy"]["value"] == "100.0%"
    assert checks["max_loss_rate"]["state"] == "n/a" and "first:" in checks["max_loss_rate"]["note"]
    live = gate.live("reply")  # what went live is the prompt file as written: compared from now on
    assert live.config["decision"]["compare"] == "live" and live.config["decision"]["first"] == FIRST
    text = render_text(good)
    assert "tickets: 100.0% vs bar 80% [pass]" in text and "judge reply-judge v1" in text
    assert "first version is graded by the judge its prompt names for it" in text
    assert "| tickets | 100.0% (30/30) | 80% | ✅ pass |" in render_markdown([good])
    Draft202012Validator(status_schema()).validate(good.to_dict())
    # a live version exists: the next version is compared with it, first: no longer used
    worse = gate.wait(gate.submit(compared(NO_REFUND_REPLIES, first=FIRST), "apply"), timeout=60)
    (run,) = worse.runs
    assert run.pinned["judge"]["name"] == "pair-judge" and run.judge["pairwise"]["live"] is True
    assert run.judge["pairwise"]["losses"] == 10
    assert worse.status == UpdateStatus.REJECTED, worse.update.reason
    assert gate.live("reply").version == 1


def test_an_admin_may_accept_a_first_version_unjudged_and_every_output_says_not_judged(
    mysql_url, mysql_gate, llm, workers, tmp_path
):
    """`submit --accept-unjudged`: admin only (the route and the domain), apply mode only; the
    update APPLIED is ☑️ "not judged" in text, Markdown, `report`, `status --json` and the
    status page, never ✅, and `wait` exits 5 (0 with `wait --accept-unjudged`)."""
    import yaml
    from support.cli import run_cli
    from support.service_harness import Service

    from gate.errors import Forbidden, UsageError

    gate = mysql_gate
    judges(gate, tmp_path)
    gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 30)))
    gate.map_dataset("reply", "tickets", "0.8", bars={"max_loss_rate": 0.05, "sentinels": 0})
    prompt = tmp_path / "reply.yaml"
    prompt.write_text(yaml.safe_dump(compared().to_config()))
    with pytest.raises(Forbidden, match="needs an admin token"):  # the domain checks the authority too
        gate.submit(compared(), "apply", accept_unjudged=True, scope="submit")
    with pytest.raises(UsageError, match="submit it with --mode apply"):
        gate.submit(compared(), "check", accept_unjudged=True)
    with pytest.raises(UsageError, match="names a judge for its first version"):
        gate.submit(compared(first=FIRST), "apply", accept_unjudged=True)
    with pytest.raises(UsageError, match="can be judged by its bars"):
        gate.submit(reply_spec(), "apply", accept_unjudged=True)
    service = Service(mysql_url, tmp_path, "--public-read")
    try:
        with service.client("submit") as ci, service.client("admin") as admin:
            body = {"prompt": compared().to_config(), "mode": "check", "accept_unjudged": True}
            refused = ci.post("/v1/updates", json=body)
            assert refused.status_code == 403 and "accept_unjudged" in refused.json()["error"]
            assert "\n" not in refused.json()["error"]
            check = admin.post("/v1/updates", json=body)
            assert check.status_code == 400 and "--mode apply" in check.json()["error"]
        remote = {"PROMPTGATE_URL": service.url, "PROMPTGATE_TOKEN": service.tokens["submit"]}
        cli = run_cli("submit", prompt, "--mode", "apply", "--accept-unjudged", env=remote)
        assert cli.returncode == 2 and "needs admin" in cli.stderr and len(cli.stderr.strip().splitlines()) == 1
        assert gate.list_updates() and all(u.prompt_name != "reply" for u in gate.list_updates())  # nothing staged
        db = ("--database-url", mysql_url)
        admin = {**remote, "PROMPTGATE_TOKEN": service.tokens["admin"]}  # through the service, as a release job
        submitted = run_cli("submit", prompt, "--mode", "apply", "--accept-unjudged", env=admin)
        assert submitted.returncode == 0, submitted.stderr
        update_id = int(submitted.stdout.strip())
        workers(gate, llm)
        waited = run_cli(*db, "wait", update_id, "--timeout", "60", "--no-progress")
        assert waited.returncode == 5, waited.stdout + waited.stderr  # applied, not judged: a pipeline can tell
        assert "APPLIED → NOT_JUDGED — not judged: accepted by an admin without a judge" in waited.stdout
        assert "☑️ applied, not judged: accepted by admin token test-admin-" in waited.stdout
        assert "✅" not in waited.stdout
        assert "tickets: n/a vs bar 80% [not judged]" in waited.stdout
        assert run_cli(*db, "wait", update_id, "--accept-unjudged", "--no-progress").returncode == 0
        assert gate.live("reply").version == 1  # live: the next version is compared with it
        status = run_cli(*db, "status", update_id, "--json")
        assert status.returncode == 5
        document = json.loads(status.stdout)
        Draft202012Validator(status_schema()).validate(document)
        assert (document["status"], document["outcome"]) == ("APPLIED", "NOT_JUDGED")
        assert document["outcome_sentence"].startswith("applied, not judged: accepted by admin token test-admin-")
        (run,) = document["runs"]
        states = {c["bar"]: c["state"] for c in run["checks"]}
        assert states["min_accuracy"] == states["max_loss_rate"] == "not judged" and run["passed"] is None
        for args in (("status", update_id, "--format", "markdown"), ("report", update_id)):
            markdown = run_cli(*db, *args)
            assert "☑️" in markdown.stdout and "✅" not in markdown.stdout, markdown.stdout
            assert "| tickets | n/a | 80% | ☑️ not judged |" in markdown.stdout
            assert "100.0%" not in markdown.stdout  # nothing compared: no figure, in the table nor the chart
        assert "applied, not judged" in run_cli(*db, "report", update_id).stdout  # the comment's headline
        with service.client("read") as reader:
            page = reader.get(f"/updates/{update_id}").text
            listed = reader.get("/").text
        assert "NOT_JUDGED" in page and "☑️ not judged" in page and "✅" not in page
        assert "NOT_JUDGED" in listed
        row = next(r for r in listed.split("<tr>") if f'href="/updates/{update_id}"' in r)
        for html in (page, row):  # issue 49.6: its APPLIED badge is grey, never green, before NOT_JUDGED
            assert 'st-quiet" data-live="badge">APPLIED</span> → <span class="badge st-not_judged' in html
            assert 'st-applied" data-live="badge">APPLIED' not in html
        history = run_cli(*db, "history", "reply").stdout
        assert "APPLIED, ☑️ not judged (accepted by an admin without a judge)" in history and "%" not in history
        with service.client("read") as reader:
            assert 'applied, <span class="muted">☑️ not judged</span>' in reader.get("/prompts/reply").text
        # the next version is compared with the one accepted: its answers were kept
        nxt = gate.wait(gate.submit(compared(NO_REFUND_REPLIES), "apply"), timeout=60)
        assert (
            nxt.runs[0].judge["pairwise"]["live"] is True and nxt.runs[0].judge["pairwise"]["losses"] > 0
        )  # may stop early
        assert nxt.status == UpdateStatus.REJECTED and nxt.exit_code == 1
    finally:
        service.stop()
