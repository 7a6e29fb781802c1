"""Shared by the Action's tests: a prompts repository on disk, the GitHub environment of an
event, and ``act`` to run the Action in this process (the fixtures ``llm``, ``model`` and
``github`` are in conftest.py)."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

from gate.action import ActionOptions, run_action
from gate.domain import Gate
from support.cli import ROOT

EXAMPLE = ROOT / "prompts-example"
GOLDEN = Path(__file__).resolve().parents[1] / "golden"
REPO = "acme/prompts"
TOKEN = "test-token"
HEAD1, HEAD2, BASE = "a1" * 20, "b2" * 20, "c3" * 20
HOSTILE = "x|@org/team <img src=x> `tick` [link](https://evil.example) www.evil.example #12 **b**\nnext line"


# --- fixtures and helpers -----------------------------------------------------------------------------


def fast(gate: Gate) -> Gate:
    """The same database with quick polling, so in-process workers finish in a second."""
    return Gate(gate.engine, gate.settings.with_(poll_interval=0.02, poll_max_interval=0.1, heartbeat_seconds=1.0))


def make_workspace(root: Path) -> Path:
    """A prompts repository: prompts/*.yaml, datasets/, gate.yaml (sources relative to it)."""
    ws = root / "repo"
    (ws / "prompts").mkdir(parents=True)
    shutil.copytree(EXAMPLE / "datasets", ws / "datasets")
    for p in (EXAMPLE / "prompts").glob("*.yaml"):
        shutil.copy(p, ws / "prompts" / p.name)
    shutil.copy(EXAMPLE / "gate.yaml", ws / "gate.yaml")
    (ws / "README.md").write_text("# prompts\n")
    return ws


def use_candidate(ws: Path, name: str) -> None:
    shutil.copy(EXAMPLE / "candidates" / f"{name}.yaml", ws / "prompts" / "ticket-urgency.yaml")


def github_env(tmp_path: Path, fake, ws: Path, event_name: str, payload: dict, sha: str, ref: str) -> dict:
    run_dir = tmp_path / f"run-{len(list(tmp_path.glob('run-*')))}"
    run_dir.mkdir()
    event_path = run_dir / "event.json"
    event_path.write_text(json.dumps(payload))
    (run_dir / "output").write_text("")
    (run_dir / "summary.md").write_text("")
    return {
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": fake.base_url,
        "GITHUB_SERVER_URL": "https://github.example",
        "GITHUB_RUN_ID": "42",
        "GITHUB_SHA": sha,
        "GITHUB_REF": ref,
        "GITHUB_WORKSPACE": str(ws),
        "GITHUB_ACTOR": "octocat",
        "GITHUB_OUTPUT": str(run_dir / "output"),
        "GITHUB_STEP_SUMMARY": str(run_dir / "summary.md"),
        "RUNNER_TEMP": str(run_dir),
    }


def pr_payload(number: int, sha: str) -> dict:
    return {
        "action": "synchronize",
        "number": number,
        "pull_request": {"number": number, "head": {"sha": sha, "ref": "feature"}, "user": {"login": "octocat"}},
        "repository": {"full_name": REPO, "default_branch": "main"},
    }


def push_payload(before: str, after: str) -> dict:
    return {
        "ref": "refs/heads/main",
        "before": before,
        "after": after,
        "pusher": {"name": "octocat"},
        "repository": {"full_name": REPO, "default_branch": "main"},
    }


def read_outputs(path: str | Path) -> dict:
    """GITHUB_OUTPUT in both of GitHub's formats: name=value and name<<DELIM ... DELIM."""
    outputs, lines = {}, Path(path).read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            j = lines.index(delim, i + 1)
            outputs[name] = "\n".join(lines[i + 1 : j])
            i = j + 1
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
            i += 1
        else:
            i += 1
    return outputs


def act(env: dict, gate: Gate, **options) -> tuple[int, str]:
    out = io.StringIO()
    opts = ActionOptions.build(**{"github_token": TOKEN, "run_workers": True, "timeout": 60, **options})
    code = run_action(env, gate, opts, out=out)
    return code, out.getvalue()


def unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))
