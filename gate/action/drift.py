"""The Action's ``mode: drift``, for a scheduled workflow: every prompt file the ``prompts``
globs match in the checkout, compared with what is live (``gate.contract.drift``). It writes the
step summary (a table, then each diff), a ``prompt-gate drift`` commit status on the
checked-out commit (success when all are in step), the ``status`` output (``in-step`` or
``drift``) and the report file; never a comment. Exit 0 when all are in step, else 1 (0
with ``fail-on-reject: false``)."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from gate.contract.drift import STATES, Drift, compare, exit_code
from gate.errors import GateError, UsageError
from gate.report.markdown_filters import code, md
from gate.untrusted import CONTROL

from .globs import PathFilter
from .inputs import DEFAULT_PROMPTS, ActionOptions
from .workflow import SECRET_EVENTS_ON_FORK_CODE, ActionLog, Event, append_summary, inside_workspace, write_output

if TYPE_CHECKING:
    from gate.prompt.spec import PromptSpec

STATUS_CONTEXT = "prompt-gate drift"
MAX_FILES = 5000
REPORT_FILE = "prompt-gate-drift.md"


def workspace_prompts(workspace: Path, patterns: str) -> list[str]:
    """Repository paths of the files the globs match, sorted (at most ``MAX_FILES``)."""
    match = PathFilter(patterns, DEFAULT_PROMPTS)
    found = []
    for folder, dirs, files in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in files:
            rel = (Path(folder) / name).relative_to(workspace).as_posix()
            if match(rel):
                found.append(rel)
    return sorted(found)[:MAX_FILES]


def read_workspace_prompts(workspace: Path, paths: list[str]) -> list[tuple[str, PromptSpec | GateError]]:
    from gate.prompt.spec import parse_spec_text
    from gate.prompt.text_file import read_text_file

    found: list[tuple[str, PromptSpec | GateError]] = []
    for path in paths:
        try:
            found.append((path, parse_spec_text(read_text_file(inside_workspace(workspace, path), path), file=path)))
        except GateError as exc:
            found.append((path, exc))
    return found


def fenced(lines: tuple[str, ...]) -> str:
    """Untrusted lines in a code block no line can close: a fence longer than any run of
    backticks in them."""
    text = CONTROL.sub("", "\n".join(lines))
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}diff\n{text}\n{fence}"


def drift_markdown(entries: list[Drift], sha: str) -> str:
    counts = ", ".join(f"{n} {s}" for s in STATES if (n := sum(e.state == s for e in entries)))
    head = "in step with live" if exit_code(entries) == 0 else "drift between the repository and live"
    lines = [f"## prompt-gate drift: {head}", "", f"Commit {code(sha[:12])}: {counts or 'no prompt'}.", ""]
    lines += ["| prompt | state | live | how it went live | file |", "|---|---|---|---|---|"]
    for e in entries:
        live = f"v{e.live_version}" if e.live_version is not None else "—"
        note = f" ({md(e.note, 200)})" if e.note else ""
        pending = f"; open apply: update {', '.join(map(str, e.pending))}" if e.pending else ""
        how, where = md(e.made_by, 300), md(e.path, 200)
        lines.append(f"| {md(e.prompt, 128)} | **{e.state}**{note}{pending} | {live} | {how} | {where} |")
    for e in entries:
        if e.diff:
            summary = f"{md(e.prompt, 128)}: live v{e.live_version} → {md(e.path, 200)}"
            lines += ["", f"<details><summary>{summary}</summary>"]
            lines += ["", fenced(e.diff), "", "</details>"]
    return "\n".join(lines) + "\n"


def run_drift(
    env: Mapping[str, str],
    gate,
    options: ActionOptions,
    *,
    out: TextIO | None = None,
    client=None,
    client_factory: Callable[..., Any] | None = None,
) -> int:
    """The drift run (see the module docstring); returns the exit code."""
    event = Event.from_env(env)
    if event.name in SECRET_EVENTS_ON_FORK_CODE:
        raise UsageError(f"event {event.name} runs with secrets on a fork's code: run drift on schedule or push")
    log = ActionLog(out)
    declared = None
    if options.gate_config:
        from gate.gateconfig.parse import load_config

        cfg = load_config(inside_workspace(event.workspace, options.gate_config), display_path=options.gate_config)
        declared = set(cfg.prompts) | set(cfg.rollouts) | set(cfg.optional_fields)
    paths = workspace_prompts(event.workspace, options.prompts)
    entries = compare(gate, read_workspace_prompts(event.workspace, paths), declared)
    report = drift_markdown(entries, event.sha)
    report_path = Path(options.report_path or Path(env.get("RUNNER_TEMP") or tempfile.gettempdir()) / REPORT_FILE)
    report_path.write_text(report, encoding="utf-8")
    append_summary(env, report)
    drifted = exit_code(entries)
    for e in entries:
        log.say(f"{e.state}: {e.prompt}" + (f" (live v{e.live_version})" if e.live_version is not None else ""))
    client = _status(log, env, event, options, client, client_factory, drifted, entries)
    out_of_step = [e.prompt for e in entries if e.state != "in-step" and e.live_version is not None]
    if client is not None and out_of_step:  # a canary rolled back since: its commit's status says so
        from .canary_end import mark_drift_canary_ends

        mark_drift_canary_ends(gate, out_of_step, log, client, options)
    write_output(env, {"status": "drift" if drifted else "in-step", "report-path": str(report_path)})
    return drifted if options.fail_on_reject else 0


def _status(log, env, event, options, client, client_factory, drifted: int, entries: list[Drift]):
    """The ``prompt-gate drift`` status; returns the GitHub client (None: none could be made)."""
    out_of_step = sum(e.state != "in-step" for e in entries)
    state, said = ("failure", f"{out_of_step} prompts out of step with live") if drifted else ("success", "in step")
    try:
        if client is None:
            from .github import GitHubClient

            token = options.github_token or env.get("GITHUB_TOKEN", "")
            client = (client_factory or GitHubClient)(token, event.repository, event.api_url)
        client.set_status(event.sha, state, said, event.run_url, context=STATUS_CONTEXT)
    except GateError as exc:
        log.warn(f"could not set the {STATUS_CONTEXT} commit status: {exc}")
    return client
