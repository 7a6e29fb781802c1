"""The GitHub Action end to end: the one PR comment (created, then edited), commit
status, outputs and step summary, exit codes, the gate config (synced on push, only shown
on a PR), apply on push, hostile rows in the comment, an end-to-end run of action.yml's own
`run:` steps against MariaDB, the local model server and a fake GitHub, and the CLI
commands the Action's users run (sync, report)."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from support.action_harness import (
    BASE,
    HEAD1,
    HEAD2,
    HOSTILE,
    REPO,
    ROOT,
    TOKEN,
    act,
    fast,
    github_env,
    make_workspace,
    pr_payload,
    push_payload,
    read_outputs,
    unescaped_pipes,
    use_candidate,
)
from support.cli import run_cli
from support.fake_github import file_entry
from support.migrated import migrated

from gate import gateconfig
from gate.calls.llm import CallResult
from gate.domain import Gate
from gate.errors import NotFound, UsageError, WaitTimedOut
from gate.prompt.spec import load_spec
from gate.report.markdown import GITHUB_COMMENT_LIMIT, MARKER


def test_pull_request_check_comment_status_outputs(mysql_gate, model, github, tmp_path):
    gate = fast(mysql_gate)
    ws = make_workspace(tmp_path)
    gateconfig.sync(gate, ws / "gate.yaml")  # what main synced earlier
    use_candidate(ws, "ticket-urgency-v2")
    cfg = yaml.safe_load((ws / "gate.yaml").read_text())
    cfg["prompts"]["ticket-urgency"][1]["min_accuracy"] = 0.1  # the PR tries to lower its own bar
    (ws / "gate.yaml").write_text(yaml.safe_dump(cfg))
    github.add_pull(12, HEAD1, ["prompts/ticket-urgency.yaml", "gate.yaml", "README.md", "docs/prompts/x.yaml"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(12, HEAD1), "m" * 40, "refs/pull/12/merge")

    code, log = act(env, gate, gate_config="gate.yaml")
    assert code == 0, log
    outputs = read_outputs(env["GITHUB_OUTPUT"])
    ids = json.loads(outputs["tracking-ids"])
    assert outputs["status"] == "passed" and len(ids) == 1
    report = gate.status(ids[0])
    assert report.status == "PASSED" and report.update.mode == "check"
    assert report.update.source == {
        "repo": REPO,
        "pr": 12,
        "sha": HEAD1,
        "path": "prompts/ticket-urgency.yaml",
        "author": "octocat",
    }
    assert {r.dataset: r.bar for r in report.runs}["urgency-hard"] == Decimal("0.8")  # the database's bar
    assert {m.dataset_name: m.min_accuracy for m in gate.mappings("ticket-urgency")}["urgency-hard"] == Decimal("0.8")
    comments = github.comments_on(12)
    assert len(comments) == 1 and comments[0]["body"].startswith(MARKER)
    body = comments[0]["body"]
    assert "takes effect after merge" in body and "min accuracy 0.8 → 0.1" in body and "PASSED" in body
    assert Path(outputs["report-path"]).read_text() == body
    assert Path(env["GITHUB_STEP_SUMMARY"]).read_text().strip() == body.strip()
    assert [(s["sha"], s["state"], s["context"]) for s in github.repo.statuses] == [
        (HEAD1, "pending", "prompt-gate"),
        (HEAD1, "success", "prompt-gate"),
    ]
    assert github.repo.statuses[-1]["target_url"] == "https://github.example/acme/prompts/actions/runs/42"
    with pytest.raises(NotFound):
        gate.live("ticket-urgency")  # check mode never goes live

    # a second push to the PR: a weaker candidate; the same comment is edited, not duplicated
    use_candidate(ws, "ticket-urgency-v2-weak")
    github.repo.pulls[12]["head"] = HEAD2
    env2 = github_env(tmp_path, github, ws, "pull_request", pr_payload(12, HEAD2), "n" * 40, "refs/pull/12/merge")
    code, log = act(env2, gate, gate_config="gate.yaml")
    assert code == 1, log
    assert read_outputs(env2["GITHUB_OUTPUT"])["status"] == "rejected"
    comments = github.comments_on(12)
    assert len(comments) == 1 and "REJECTED" in comments[0]["body"] and "urgency-hard" in comments[0]["body"]
    assert len(github.calls_to("POST", r"/issues/12/comments$")) == 1
    assert len(github.calls_to("PATCH", r"/issues/comments/\d+$")) == 1
    assert github.repo.statuses[-1]["sha"] == HEAD2 and github.repo.statuses[-1]["state"] == "failure"

    # fail-on-reject off: the same verdict, exit 0, the status still says failure
    env3 = github_env(tmp_path, github, ws, "pull_request", pr_payload(12, HEAD2), "n" * 40, "refs/pull/12/merge")
    code, _ = act(env3, gate, gate_config="gate.yaml", fail_on_reject=False)
    assert code == 0 and github.repo.statuses[-1]["state"] == "failure"

    # release pipelines: wait --sha
    exit_code, reports = gate.wait_for_sha(HEAD2, timeout=5, mode="check")
    assert exit_code == 1 and [r.status for r in reports] == ["REJECTED"]
    assert gate.wait_for_sha(HEAD1, prompt="ticket-urgency", mode="check")[0] == 0
    with pytest.raises(WaitTimedOut):
        gate.wait_for_sha("f" * 40, timeout=0.2)


def test_invalid_prompt_gets_an_annotation_and_nothing_is_submitted(tmp_path, github, sqlite_url, model):
    gate = fast(Gate.connect(migrated(sqlite_url), upgrade=True))
    ws = make_workspace(tmp_path)
    gateconfig.sync(gate, ws / "gate.yaml")
    (ws / "prompts" / "broken.yaml").write_text(
        "name: broken\nmodel: m\nparams:\n  temperature: 0\n  temprature: 1\nmessages:\n  - {role: user, content: hi}\n"
    )
    (ws / "prompts" / "ungated.yaml").write_text("name: ungated\nmodel: m\nmessages:\n  - {role: user, content: hi}\n")
    (ws / "prompts" / "twin.yaml").write_text((ws / "prompts" / "refund-eligibility.yaml").read_text())
    github.add_pull(
        7,
        HEAD1,
        [
            "prompts/broken.yaml",
            "prompts/ungated.yaml",
            "prompts/refund-eligibility.yaml",
            "prompts/twin.yaml",
            file_entry("prompts/gone.yaml", "removed"),
        ],
    )
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(7, HEAD1), "m" * 40, "refs/pull/7/merge")
    code, log = act(env, gate, gate_config="gate.yaml", run_workers=True)
    assert code == 2, log
    assert "::error file=prompts/broken.yaml,line=5,title=prompt-gate::params.temprature: unknown parameter" in log
    assert "::error file=prompts/twin.yaml,line=" in log and "also defined in prompts/refund-eligibility.yaml" in log
    assert (
        "::error file=prompts/ungated.yaml,line=1,title=prompt-gate::name: prompt ungated is not gated: the gate has "
        "no bars for it; add them to gate.yaml under prompts: ungated: [{dataset: NAME, min_accuracy: 0.9}]" in log
    )  # issue 35.1: it was a warning, and the run could pass
    assert "::warning file=prompts/gone.yaml" in log
    outputs = read_outputs(env["GITHUB_OUTPUT"])
    assert outputs["status"] == "invalid" and len(json.loads(outputs["tracking-ids"])) == 1  # the valid one ran
    body = github.comments_on(7)[0]["body"]
    assert "Invalid files" in body and "temprature" in body and "Not evaluated" in body and "ungated" in body
    assert github.repo.statuses[-1]["state"] == "failure"
    assert [u.prompt_name for u in gate.list_updates()] == ["refund-eligibility"]
    gate.close()


def test_nothing_to_evaluate_writes_no_comment(tmp_path, github, sqlite_url):
    gate = Gate.connect(migrated(sqlite_url), upgrade=True)
    ws = make_workspace(tmp_path)
    github.add_pull(8, HEAD1, ["README.md", "prompts/notes.txt"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(8, HEAD1), "m" * 40, "refs/pull/8/merge")
    code, log = act(env, gate, gate_config="gate.yaml")
    assert code == 0, log
    assert github.comments_on(8) == [] and github.repo.statuses[-1]["state"] == "success"
    assert read_outputs(env["GITHUB_OUTPUT"])["status"] == "skipped"
    with pytest.raises(UsageError, match="unmerged prompts live"):
        act(env, gate, mode="apply")
    gate.close()


def test_push_to_default_branch_syncs_then_applies(mysql_gate, model, github, tmp_path):
    gate = fast(mysql_gate)
    ws = make_workspace(tmp_path)
    gateconfig.sync(gate, ws / "gate.yaml")
    first = gate.submit(load_spec(ws / "prompts" / "ticket-urgency.yaml"), "apply", {"key": "seed"})
    from workers.supervisor import run_until_terminal

    assert run_until_terminal(gate, [first], timeout=30)[0].status == "APPLIED"
    assert gate.live("ticket-urgency").version == 1
    # the merged change: a better candidate, and a new bar in the gate config
    use_candidate(ws, "ticket-urgency-v2")
    cfg = yaml.safe_load((ws / "gate.yaml").read_text())
    cfg["prompts"]["ticket-urgency"][0]["min_accuracy"] = 0.85
    (ws / "gate.yaml").write_text(yaml.safe_dump(cfg))
    github.add_compare(BASE, HEAD2, ["gate.yaml", "prompts/ticket-urgency.yaml", "README.md"])
    env = github_env(tmp_path, github, ws, "push", push_payload(BASE, HEAD2), HEAD2, "refs/heads/main")
    code, log = act(env, gate, gate_config="gate.yaml")
    assert code == 0, log
    assert {m.dataset_name: m.min_accuracy for m in gate.mappings("ticket-urgency")}["urgency-regression"] == Decimal(
        "0.85"
    )  # synced before the submit
    (uid,) = json.loads(read_outputs(env["GITHUB_OUTPUT"])["tracking-ids"])
    report = gate.status(uid)
    assert report.status == "APPLIED" and {r.dataset: r.bar for r in report.runs}["urgency-regression"] == Decimal(
        "0.85"
    )
    live = gate.live("ticket-urgency")
    assert live.version == 2 and live.applied_update_id == uid
    assert read_outputs(env["GITHUB_OUTPUT"])["status"] == "applied"
    (comment,) = github.repo.commit_comments
    assert comment["sha"] == HEAD2 and "APPLIED" in comment["body"] and "Synced into the gate" in comment["body"]
    assert github.repo.statuses[-1]["sha"] == HEAD2 and github.repo.statuses[-1]["state"] == "success"
    # a push to another branch is only checked
    env2 = github_env(
        tmp_path, github, ws, "push", {**push_payload(BASE, HEAD2), "ref": "refs/heads/dev"}, HEAD2, "refs/heads/dev"
    )
    code, _ = act(env2, gate, gate_config="gate.yaml")
    (uid2,) = json.loads(read_outputs(env2["GITHUB_OUTPUT"])["tracking-ids"])
    assert code == 0 and gate.status(uid2).update.mode == "check" and gate.live("ticket-urgency").version == 2


def test_hostile_dataset_rows_and_model_output_are_escaped_in_the_comment(tmp_path, github, sqlite_url):
    """Real pipeline: a dataset row with @org/team, <img>, | and backticks in its id, and a
    model that answers with a 70,000-character output (the executor keeps 4,000)."""
    from workers import ROLES
    from workers.supervisor import WorkerProcess

    gate = fast(Gate.connect(migrated(sqlite_url), upgrade=True))
    ws = make_workspace(tmp_path)
    with (ws / "datasets" / "hostile.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "text"])
        w.writerow(["row|@org/team<img src=x>`tick`", "yes", "first"])
        for i in range(5):
            w.writerow([f"ok-{i}", "no", "fine"])
    gate.register_dataset("hostile", "datasets/hostile.csv", base_dir=ws)
    gate.map_dataset("hostile-prompt", "hostile", "0.9")
    (ws / "prompts" / "hostile.yaml").write_text(
        "name: hostile-prompt\nmodel: m\nmessages:\n  - {role: user, content: '{{ item.text }}'}\n"
    )

    def loud_model(spec, item, **_):
        if item["text"] == "first":
            return CallResult("no", True, "no " + HOSTILE + " ```" + "z" * 70000, 1)
        return CallResult("no", True, "no", 1)

    github.add_pull(9, HEAD1, ["prompts/hostile.yaml"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(9, HEAD1), "m" * 40, "refs/pull/9/merge")
    worker = WorkerProcess(gate.engine, gate.settings, ROLES, call=loud_model).start()
    try:
        code, log = act(env, gate, run_workers=False, timeout=30)
    finally:
        worker.shutdown(10)
    assert code == 1, log
    body = github.comments_on(9)[0]["body"]
    assert len(body) <= GITHUB_COMMENT_LIMIT
    assert "<img" not in body and "@org/team" not in body and "https://evil" not in body and "z" * 500 not in body
    (row,) = [ln for ln in body.splitlines() if ln.startswith("| row")]
    # five cells (item, input, expected, answered, candidate's answer): six pipes, none from the row
    assert unescaped_pipes(row) == 6 and "@\u200dorg/team" in row and "\\`tick\\`" in row


# --- action.yml, end to end ------------------------------------------------------------------------------


EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def evaluate(text, ctx: dict) -> str:
    """Substitute ${{ a.b.c }} the way a runner does (only plain property paths)."""
    if not isinstance(text, str):
        return str(text).lower() if isinstance(text, bool) else str(text)

    def one(m):
        value = ctx
        for part in m.group(1).split("."):
            if not isinstance(value, dict) or part not in value:
                raise AssertionError(f"expression {m.group(0)} is not available to the runner emulation")
            value = value[part]
        return str(value).lower() if isinstance(value, bool) else str(value)

    return EXPR.sub(one, text)


IN_JOB = "## The workflow with the workers in the job"
WITH_SERVICE = "## The workflow (recommended: with the gate service)"


def workflow_from_docs(heading: str = IN_JOB) -> dict:
    doc = (ROOT / "docs" / "github-action.md").read_text()
    section = doc.split(heading, 1)[1]
    return yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))


def test_action_yml_passes_inputs_only_through_env():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    assert set(action["inputs"]) == {
        "gate-url",
        "public-url",
        "gate-token",
        "database-url",
        "prompts",
        "gate-config",
        "mode",
        "run-workers",
        "timeout",
        "fail-on-reject",
        "comment",
        "github-token",
        "comment-author",
        "reuse",
        "full",
        "override-rollback",
    }
    assert set(action["outputs"]) == {"status", "tracking-ids", "report-path"}
    for step in action["runs"]["steps"]:
        assert "${{" not in step["run"], f"step {step['id']} interpolates an expression into shell code"
    workflow = workflow_from_docs()
    assert workflow_from_docs(WITH_SERVICE)["permissions"] == workflow["permissions"]
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write", "statuses": "write"}
    assert workflow[True if True in workflow else "on"].keys() >= {"pull_request", "push"}


def run_action_yml(heading: str, ws: Path, env: dict, tmp_path: Path, wf_ctx: dict, extra_env: dict) -> dict:
    """The documented workflow's prompt-gate step, as a runner runs action.yml's own steps:
    its inputs from the workflow's `with:` (expressions evaluated in ``wf_ctx``) and
    action.yml's defaults, each `run:` script under bash with the step's env. Returns the
    Action's outputs and each step's process."""
    workflow = workflow_from_docs(heading)
    steps = workflow["jobs"]["gate"]["steps"]
    assert steps[0]["uses"].startswith("actions/checkout")  # the workspace stands in for it
    (gate_step,) = [s for s in steps if "prompt-gate@" in s.get("uses", "")]
    given = {k: evaluate(v, wf_ctx) for k, v in (gate_step.get("with") or {}).items()}
    step_env = {k: evaluate(v, wf_ctx) for k, v in (gate_step.get("env") or {}).items()}
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    inputs = {
        name: given[name] if name in given else evaluate(spec.get("default", ""), wf_ctx)
        for name, spec in action["inputs"].items()
    }
    assert not set(given) - set(action["inputs"]), "the documented workflow passes an unknown input"
    job_env = {
        **{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")},
        **env,
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_TOKEN": "",
        **extra_env,
        "PYTHONPATH": str(ROOT),
    }  # the package as the skipped install left it
    ctx = {"inputs": inputs, "github": {"action_path": str(ROOT), "token": TOKEN}, "steps": {}}
    results, envs = [], []
    for step in action["runs"]["steps"]:
        out_file = tmp_path / f"step-{step['id']}.out"
        out_file.write_text("")
        if step["id"] == "install":
            # Skipped: creating a venv and pip-installing the action's path needs the package
            # index. The package is importable from the checkout (PYTHONPATH), so the step's
            # only effect, its `python` output, is what it would be in a venv with it installed.
            probe = subprocess.run([sys.executable, "-c", "import gate.cli"], env=job_env, cwd=ws)
            assert probe.returncode == 0
            out_file.write_text(f"python={sys.executable}\npath={ROOT}\n")
        else:
            assert step["shell"] == "bash"
            script = tmp_path / f"step-{step['id']}.sh"
            script.write_text(evaluate(step["run"], ctx))
            run_env = {
                **job_env,
                **step_env,
                **{k: evaluate(v, ctx) for k, v in (step.get("env") or {}).items()},
                "GITHUB_OUTPUT": str(out_file),
            }
            envs.append(run_env)
            proc = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                env=run_env,
                cwd=ws,
                capture_output=True,
                text=True,
                timeout=120,
            )
            results.append(proc)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        ctx["steps"][step["id"]] = {"outputs": read_outputs(out_file)}
    outputs = {name: evaluate(spec["value"], ctx) for name, spec in action["outputs"].items()}
    return {"outputs": outputs, "results": results, "envs": envs}


def test_end_to_end_action_yml_steps(mysql_url, llm, github, tmp_path):
    setup = Gate.connect(migrated(mysql_url), upgrade=True)  # the gate's operator ran db upgrade and
    ws = make_workspace(tmp_path)  # main synced the gate config earlier
    gateconfig.sync(setup, ws / "gate.yaml")
    setup.close()
    use_candidate(ws, "ticket-urgency-v2")
    github.add_pull(21, HEAD1, ["prompts/ticket-urgency.yaml", "README.md"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(21, HEAD1), "m" * 40, "refs/pull/21/merge")
    wf_ctx = {
        "secrets": {"PROMPTGATE_DATABASE_URL": mysql_url, "OPENAI_API_KEY": "test-key"},
        "github": {"token": TOKEN},
    }
    ran = run_action_yml(
        IN_JOB,
        ws,
        env,
        tmp_path,
        wf_ctx,
        {
            "OPENAI_BASE_URL": llm.base_url,  # a repository variable in real use
            "PROMPTGATE_POLL_INTERVAL": "0.02",
            "PROMPTGATE_POLL_MAX_INTERVAL": "0.1",
        },
    )
    outputs = ran["outputs"]
    assert outputs["status"] == "passed", ran["results"][-1].stdout
    ids = json.loads(outputs["tracking-ids"])
    assert len(ids) == 1 and Path(outputs["report-path"]).is_file()
    (body,) = [c["body"] for c in github.comments_on(21)]
    assert body.startswith(MARKER) and "ticket-urgency: PASSED" in body
    assert [s["state"] for s in github.repo.statuses] == ["pending", "success"]
    check = Gate.connect(mysql_url)
    try:
        assert check.status(ids[0]).update.source["sha"] == HEAD1
    finally:
        check.close()


def test_end_to_end_with_the_gate_service_and_no_database_url(mysql_url, llm, github, tmp_path):
    """The recommended workflow: gate-url + gate-token, the service and the workers run
    elsewhere (here: a real `promptgate serve` and a real worker process on the gate's
    database), and no database URL anywhere in the job's environment."""
    from support.service_harness import Service
    from support.workers_harness import WorkerFleet, worker_env

    setup = Gate.connect(migrated(mysql_url), upgrade=True)
    ws = make_workspace(tmp_path)
    gateconfig.sync(setup, ws / "gate.yaml")  # the operator synced from main earlier
    setup.close()
    service = Service(mysql_url, tmp_path)
    fleet = WorkerFleet(worker_env(mysql_url, llm.base_url), tmp_path)
    fleet.start(1)
    try:
        use_candidate(ws, "ticket-urgency-v2")
        github.add_pull(22, HEAD1, ["prompts/ticket-urgency.yaml"])
        env = github_env(tmp_path, github, ws, "pull_request", pr_payload(22, HEAD1), "m" * 40, "refs/pull/22/merge")
        wf_ctx = {
            "secrets": {"PROMPTGATE_TOKEN": service.tokens["submit"]},
            "vars": {"PROMPTGATE_URL": service.url},
            "github": {"token": TOKEN},
        }
        ran = run_action_yml(WITH_SERVICE, ws, env, tmp_path, wf_ctx, {})
    finally:
        fleet.stop_all()
        service.stop()
    for step_env in ran["envs"]:
        assert not step_env.get("PROMPTGATE_DATABASE_URL"), "a database URL reached the job"
        assert not any("mysql" in str(v) or "pg_test_" in str(v) for v in step_env.values()), (
            "a database URL reached the job"
        )
    outputs = ran["outputs"]
    assert outputs["status"] == "passed", ran["results"][-1].stdout + ran["results"][-1].stderr
    (update_id,) = json.loads(outputs["tracking-ids"])
    (body,) = [c["body"] for c in github.comments_on(22)]
    assert body.startswith(MARKER) and "ticket-urgency: PASSED" in body
    assert [s["state"] for s in github.repo.statuses] == ["pending", "success"]
    check = Gate.connect(mysql_url)
    try:
        source = check.status(update_id).update.source
        assert source["sha"] == HEAD1 and source["pr"] == 22 and source["submitted_by"].startswith("test-submit-")
    finally:
        check.close()


# --- the CLI commands ---------------------------------------------------------------------------------


def cli_action(*args, env=None, cwd=None):
    """`promptgate ...` as the Action's step runs it (python -m gate), forked from the preloaded
    server (support.cli), without the test process's database URL unless ``env`` gives one."""
    unset = () if "PROMPTGATE_DATABASE_URL" in (env or {}) else ("PROMPTGATE_DATABASE_URL",)
    return run_cli(*args, env=env, cwd=cwd, timeout=60, module="gate", unset=unset)


def test_cli_sync_report_and_action_errors(tmp_path, sqlite_url):
    ws = make_workspace(tmp_path)
    dry = cli_action("sync", ws / "gate.yaml", "--dry-run", "--database-url", sqlite_url)
    assert dry.returncode == 0, dry.stderr
    assert "would: bar ticket-urgency × urgency-hard: new, min accuracy 0.8" in dry.stdout
    done = cli_action("sync", ws / "gate.yaml", "--json", "--database-url", sqlite_url)
    assert done.returncode == 0 and len(json.loads(done.stdout)["changes"]) == 16  # 8 datasets, 8 bars
    again = cli_action("sync", ws / "gate.yaml", "--database-url", sqlite_url)
    assert again.returncode == 0 and "already matches" in again.stdout
    (ws / "bad.yaml").write_text("datasets:\n  d: {source: nowhere.csv}\n")
    bad = cli_action("sync", ws / "bad.yaml", "--database-url", sqlite_url)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "datasets.d.source: no such file" in bad.stderr

    gate = Gate.connect(sqlite_url)
    uid = gate.submit(load_spec(ws / "prompts" / "ticket-urgency.yaml"), "check", {"sha": HEAD1})
    gate.close()
    report = cli_action("report", "--sha", HEAD1, "--database-url", sqlite_url)
    assert report.returncode == 0 and f"update {uid}" in report.stdout and "ticket-urgency: PENDING" in report.stdout

    no_db = cli_action("action", env={"GITHUB_EVENT_NAME": "pull_request"})
    assert no_db.returncode == 2 and "database-url" in no_db.stderr and "Traceback" not in no_db.stderr
    no_event = cli_action("action", "--database-url", sqlite_url, env={"GITHUB_EVENT_NAME": ""})
    assert no_event.returncode == 2 and "not running in GitHub Actions" in no_event.stderr
