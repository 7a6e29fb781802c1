"""The recommended setup as a new team runs it, end to end (issue 24): a prompt repository
laid out like prompts-example/ (prompts, CSV/JSONL dataset files beside gate.yaml),
`promptgate serve` and a worker process holding the only database URL, the Action's step
run exactly as action.yml runs it (`python -P -m gate action` with only GITHUB_*, INPUT_*
and PROMPTGATE_URL/PROMPTGATE_TOKEN in its environment) against a fake GitHub:

(a) a push to main with the admin token syncs the gate config (the dataset files
    uploaded from the checkout) and applies a good prompt;
(b) a pull request with a submit token gets one comment that rejects a weak candidate and
    lists the rows its dataset file changes under "takes effect after merge";
(c) a release pipeline with a read token waits on the open apply of (a) by
    `promptgate wait --sha` and gets exit 0.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml
from support.action_harness import BASE, HEAD1, HEAD2, TOKEN, github_env, pr_payload, push_payload, read_outputs
from support.cli import ROOT

from gate.domain import Gate
from gate.report.markdown import MARKER

EXAMPLE = ROOT / "prompts-example"
EXPR = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")
WITH_SERVICE = "## The workflow (recommended: with the gate service)"
KEPT = ("PATH", "HOME", "LANG", "TMPDIR")  # what a runner's shell has besides the step's env


def workspace(tmp_path: Path) -> Path:
    """A checkout of a prompt repository laid out like prompts-example/ (no .git)."""
    ws = tmp_path / "checkout"
    shutil.copytree(EXAMPLE, ws)
    return ws


def _evaluate(text, ctx: dict) -> str:
    def one(m):
        value = ctx
        for part in m.group(1).split("."):
            value = value[part]
        return str(value).lower() if isinstance(value, bool) else str(value)

    return EXPR.sub(one, text) if isinstance(text, str) else str(text)


def _documented_inputs(job: str, wf_ctx: dict) -> dict:
    """The `with:` of the documented workflow's prompt-gate step in ``job``."""
    doc = (ROOT / "docs" / "github-action.md").read_text()
    section = doc.split(WITH_SERVICE, 1)[1]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    for block in blocks[:2]:
        text = block if block.startswith("name:") else "jobs:\n" + block
        jobs = yaml.safe_load(text)["jobs"]
        if job in jobs:
            (step,) = [s for s in jobs[job]["steps"] if "prompt-gate@" in s.get("uses", "")]
            return {k: _evaluate(v, wf_ctx) for k, v in step["with"].items()}
    raise AssertionError(f"docs/github-action.md shows no job {job!r}")


def start_gate_step(ws: Path, env: dict, inputs: dict, tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """action.yml's `gate` step as a runner runs it: its `run:` under bash, its env from the
    inputs (action.yml's defaults for the rest); the package importable as the install
    step would leave it (PYTHONPATH, never the checkout: -P)."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    given = {
        name: inputs.get(name, _evaluate(spec.get("default", ""), {"github": {"token": TOKEN}}))
        for name, spec in action["inputs"].items()
    }
    (step,) = [s for s in action["runs"]["steps"] if s["id"] == "gate"]
    out_file = tmp_path / f"gate-step-{time.monotonic_ns()}.out"
    out_file.write_text("")
    ctx = {
        "inputs": given,
        "steps": {"install": {"outputs": {"python": sys.executable, "path": str(ROOT)}}},
        "github": {"action_path": str(ROOT), "token": TOKEN},
    }
    step_env = {k: _evaluate(v, ctx) for k, v in step["env"].items()}
    run_env = {
        **{k: v for k, v in os.environ.items() if k in KEPT},
        **env,
        **step_env,
        "GITHUB_OUTPUT": str(out_file),
        "PYTHONPATH": str(ROOT),
    }
    assert not any(k.startswith("PROMPTGATE_DATABASE") and v for k, v in run_env.items())
    assert set(run_env) <= {
        *KEPT,
        "PYTHONPATH",
        "PROMPTGATE_PYTHON",
        "PROMPTGATE_URL",
        "PROMPTGATE_TOKEN",
        "PROMPTGATE_DATABASE_URL",
        "PROMPTGATE_PUBLIC_URL",  # the `public-url` input: where the comment links each update's page
    } | {k for k in run_env if k.startswith(("GITHUB_", "INPUT_", "RUNNER_"))}
    script = tmp_path / f"gate-step-{time.monotonic_ns()}.sh"
    script.write_text(step["run"])
    proc = subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        env=run_env,
        cwd=ws,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc, out_file


def finish(proc: subprocess.Popen, timeout: float = 300) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def wait_for_update(db_url: str, sha: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Until the Action has submitted for ``sha`` (or has ended without doing so)."""
    gate = Gate.connect(db_url)
    try:
        deadline = time.monotonic() + timeout
        while not gate.updates_for_sha(sha):
            if proc.poll() is not None:
                return
            assert time.monotonic() < deadline, "the Action submitted nothing"
            time.sleep(0.1)
    finally:
        gate.close()


def change_rows(path: Path) -> None:
    """A pull request's edit of a dataset file: one row relabelled, one removed, one added."""
    lines = path.read_text().splitlines(keepends=True)
    header, rows = lines[0], lines[1:]
    relabelled = rows[0].replace(",urgent,", ",normal,", 1)
    assert relabelled != rows[0]
    path.write_text(
        header
        + relabelled
        + "".join(rows[1:-1])
        + 'urg-new-1,urgent,Checkout broken,"Nobody can pay, the checkout page errors."\n'
    )


def test_the_recommended_setup_end_to_end(mysql_url, llm, github, tmp_path):
    from support.service_harness import Service
    from support.workers_harness import WorkerFleet, worker_env

    ws = workspace(tmp_path)
    service = Service(mysql_url, tmp_path)  # the operator: db upgrade, tokens, serve
    fleet = WorkerFleet(worker_env(mysql_url, llm.base_url), tmp_path)
    waiter = None
    try:
        # (a) the first push to main: the gate config with its dataset files, a good prompt
        shutil.copy(EXAMPLE / "candidates" / "ticket-urgency-v2.yaml", ws / "prompts" / "ticket-urgency.yaml")
        github.add_compare(
            BASE,
            HEAD1,
            ["gate.yaml", "prompts/ticket-urgency.yaml", *[f"datasets/{p.name}" for p in (ws / "datasets").iterdir()]],
        )
        env = github_env(tmp_path, github, ws, "push", push_payload(BASE, HEAD1), HEAD1, "refs/heads/main")
        admin = _documented_inputs(
            "apply",
            {"vars": {"PROMPTGATE_URL": service.url}, "secrets": {"PROMPTGATE_ADMIN_TOKEN": service.tokens["admin"]}},
        )
        push, push_out = start_gate_step(ws, env, admin, tmp_path)
        wait_for_update(mysql_url, HEAD1, push)
        assert push.poll() is None, finish(push)[1]  # submitted, and waiting: the apply is open
        # (c) meanwhile a release pipeline waits for the commit with a read token
        waiter = subprocess.Popen(
            [sys.executable, "-m", "gate.cli", "wait", "--sha", HEAD1, "--timeout", "240"],
            env={
                **{k: v for k, v in os.environ.items() if k in KEPT},
                "PYTHONPATH": str(ROOT),
                "PROMPTGATE_URL": service.url,
                "PROMPTGATE_TOKEN": service.tokens["read"],
            },
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.5)
        waiting_while_open = waiter.poll() is None
        fleet.start(1)
        code, log = finish(push)
        assert code == 0, log
        outputs = read_outputs(push_out)
        assert outputs["status"] == "applied", log
        (uid,) = json.loads(outputs["tracking-ids"])
        check = Gate.connect(mysql_url)
        try:
            assert check.status(uid).status == "APPLIED"
            datasets = {ds.name: ds for ds, _ in check.list_datasets()}
            assert set(datasets) == {
                "urgency-regression",
                "urgency-hard",
                "refund-regression",
                "refund-hard",
                "support-emails",
                "reply-judge-labels",
                "support-tickets",
                "support-conversations",
            }
            urgency = datasets["urgency-regression"]
            assert urgency.source_uri == "upload://datasets/urgency-regression.csv"
            assert urgency.options["upload_commit"] == HEAD1 and urgency.options["declared_in"] == "gate.yaml"
            before = check.dataset_version("urgency-regression")
        finally:
            check.close()
        (comment,) = github.repo.commit_comments
        assert "APPLIED" in comment["body"]

        # (b) a pull request: a weak candidate, and an edit of a dataset file
        shutil.copy(EXAMPLE / "candidates" / "ticket-urgency-v2-weak.yaml", ws / "prompts" / "ticket-urgency.yaml")
        change_rows(ws / "datasets" / "urgency-regression.csv")
        github.add_pull(31, HEAD2, ["prompts/ticket-urgency.yaml", "datasets/urgency-regression.csv"])
        env = github_env(tmp_path, github, ws, "pull_request", pr_payload(31, HEAD2), "m" * 40, "refs/pull/31/merge")
        submit = _documented_inputs(
            "gate", {"vars": {"PROMPTGATE_URL": service.url}, "secrets": {"PROMPTGATE_TOKEN": service.tokens["submit"]}}
        )
        code, log = finish(start_gate_step(ws, env, submit, tmp_path)[0])
        assert code == 1, log  # fail-on-reject
        (body,) = [c["body"] for c in github.comments_on(31)]
        assert body.startswith(MARKER) and "ticket-urgency: REJECTED" in body, body
        after_merge = body.split("takes effect after merge", 1)[1]
        assert "urgency-regression" in after_merge and "1 added, 1 removed, 1 relabelled" in after_merge, body
        assert "urg-new-1" in after_merge and "urg-001: urgent → normal" in after_merge, body
        check = Gate.connect(mysql_url)
        try:  # the pull request stored nothing
            assert [v.id for v in check.dataset_versions("urgency-regression")[1]] == [before.id]
        finally:
            check.close()

        # (c) the release pipeline's wait: it waited while the apply was open, and passed
        out, err = waiter.communicate(timeout=240)
        assert waiting_while_open and waiter.returncode == 0, out + err
    finally:
        if waiter is not None and waiter.poll() is None:
            waiter.kill()
            waiter.communicate()
        fleet.stop_all()
        service.stop()
