"""The GitHub Actions environment of one run: the event (GITHUB_EVENT_NAME and its
payload), which mode it means, the outputs and step-summary files, and the log, where
every plain line is made inert (``gate.untrusted``) and only the annotations we build are
workflow commands."""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from gate.errors import SpecError, UsageError
from gate.prompt.text_file import read_text_file
from gate.untrusted import workflow_lines

from .problems import command_data

PR_EVENTS = ("pull_request",)
# Events that run with the base repository's secrets while a fork's code is checked out:
# the workflow would hand the gate's database URL and tokens to that code.
SECRET_EVENTS_ON_FORK_CODE = ("pull_request_target", "workflow_run")
SECURITY_DOCS = "https://docs.github.com/en/actions/reference/events-that-trigger-workflows#pull_request_target"


class ActionLog:
    """The step's log: ``say`` a plain line (untrusted text in it is made inert), ``command``
    a workflow command we built, ``warn`` a warning annotation."""

    def __init__(self, out: TextIO | None = None):
        self.out = out or sys.stdout

    def say(self, line: str) -> None:
        print(workflow_lines(line), file=self.out, flush=True)

    def command(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def warn(self, message: str) -> None:
        self.command(f"::warning title=prompt-gate::{command_data(message)}")


@dataclass
class Event:
    name: str
    payload: dict
    repository: str
    sha: str
    ref: str
    workspace: Path
    run_url: str | None
    api_url: str | None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Event:
        name = env.get("GITHUB_EVENT_NAME", "")
        path = env.get("GITHUB_EVENT_PATH", "")
        if not name or not path:
            raise UsageError("not running in GitHub Actions: GITHUB_EVENT_NAME and GITHUB_EVENT_PATH are not set")
        try:
            payload = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read the event payload {path}: {exc}") from None
        repository = env.get("GITHUB_REPOSITORY", "")
        server, run_id = env.get("GITHUB_SERVER_URL", "").rstrip("/"), env.get("GITHUB_RUN_ID", "")
        run_url = f"{server}/{repository}/actions/runs/{run_id}" if server and run_id and repository else None
        return cls(
            name=name,
            payload=payload,
            repository=repository,
            sha=env.get("GITHUB_SHA", ""),
            ref=env.get("GITHUB_REF", ""),
            workspace=Path(env.get("GITHUB_WORKSPACE") or os.getcwd()),
            run_url=run_url,
            api_url=env.get("GITHUB_API_URL") or None,
        )

    @property
    def is_pr(self) -> bool:
        return self.name in PR_EVENTS

    @property
    def default_branch(self) -> str | None:
        return (self.payload.get("repository") or {}).get("default_branch")

    @property
    def is_default_branch_push(self) -> bool:
        return self.name == "push" and bool(self.default_branch) and self.ref == f"refs/heads/{self.default_branch}"


def effective_mode(requested: str, event: Event) -> str:
    if event.name in SECRET_EVENTS_ON_FORK_CODE:
        raise UsageError(
            f"event {event.name} runs with secrets on a fork's code: run prompt-gate on pull_request "
            f"(see docs/security.md and {SECURITY_DOCS})"
        )
    if event.is_pr:
        if requested == "apply":
            raise UsageError("mode apply on a pull request would make unmerged prompts live: use check (or auto)")
        return "check"
    if event.name != "push":
        raise UsageError(f"event {event.name!r} is not supported: run the action on pull_request or push")
    if requested == "auto":
        return "apply" if event.is_default_branch_push else "check"
    return requested


def write_output(env: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    path = env.get("GITHUB_OUTPUT")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        for name, value in outputs.items():
            delim = f"ghadelim_{secrets.token_hex(8)}"
            fh.write(f"{name}<<{delim}\n{value}\n{delim}\n")


def append_summary(env: Mapping[str, str], text: str) -> None:
    path = env.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")


# --- the workspace (the checkout) -----------------------------------------------------------


def repo_path(path: str) -> str:
    """A repository-relative path as GitHub lists it (no ./, no leading /)."""
    path = path.strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


def inside_workspace(workspace: Path, rel: str) -> Path:
    """The file ``rel`` of the checkout; UsageError when it resolves outside it (a symlink,
    ``..``)."""
    full = (workspace / rel).resolve()
    if workspace.resolve() not in full.parents and full != workspace.resolve():
        raise UsageError(f"{rel}: outside the workspace")
    return full


def text_or_none(path: Path, display: str) -> str | None:
    """The file's text for locating a problem's line (None when it cannot be read within
    the size limit)."""
    try:
        return read_text_file(path, display)
    except SpecError:
        return None
