"""One run of the Action, phase by phase: what changed, the gate config (synced on apply,
diffed on a pull request), the submissions, the wait, and the publishing of the verdict
(comment, commit status, summary, outputs). ``run_action`` is the short driver."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from gate import gateconfig
from gate.contract.shape import GateAPI
from gate.errors import GateError, GitHubError, SpecError, UsageError
from gate.prompt.spec import PromptSpec, parse_spec_text
from gate.prompt.text_file import read_text_file
from gate.report.markdown import GITHUB_COMMENT_LIMIT, STEP_SUMMARY_LIMIT, render_markdown
from gate.report.text import render_text
from gate.report.update import UpdateReport
from gate.settings import public_url
from gate.states import UpdateStatus

from .gating import GATE_DOWN, gate_down, github_down, proposed_bars, record_commit, scope_refusal
from .github import ChangedFile, GitHubClient
from .globs import PathFilter, split_patterns
from .inputs import DEFAULT_PROMPTS, ActionOptions
from .outcome import commit_state, exit_code_for, overall_status
from .problems import Problem, field_line, problem_from
from .workflow import (
    ActionLog,
    Event,
    append_summary,
    effective_mode,
    inside_workspace,
    repo_path,
    text_or_none,
    write_output,
)

if TYPE_CHECKING:
    from gate.domain import Gate

REPORT_FILE = "prompt-gate-report.md"
NOT_CHECKED_OUT = "not in the checkout (did the workflow run actions/checkout?)"


@dataclass
class ActionRun:
    """What one run knows and has found so far."""

    env: Mapping[str, str]
    gate: GateAPI  # the database's Gate, or the service's RemoteGate (gate-url)
    options: ActionOptions
    event: Event
    mode: str
    client: Any
    log: ActionLog
    number: int | None = None  # the pull request
    sha: str = ""
    author: str | None = None
    ref: str | None = None
    changed: list[ChangedFile] = field(default_factory=list)
    config_path: str = ""
    problems: list[Problem] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    config_result: Any = None
    ids: list[int] = field(default_factory=list)
    blocked: str | None = None  # why the run could not gate at all (the token's scope), in one line
    proposed: dict | None = None  # prompt -> the bars the checkout's gate config declares (read once)

    @property
    def config_changed(self) -> bool:
        return bool(self.config_path) and any(f.path == self.config_path for f in self.changed)


def run_action(
    env: Mapping[str, str],
    gate: GateAPI,
    options: ActionOptions,
    *,
    out: TextIO | None = None,
    client=None,
    client_factory: Callable[..., Any] | None = None,
) -> int:
    """Run the Action for the event described by ``env`` (GITHUB_*). Returns the exit code.
    ``client`` (a gate.action.github.GitHubClient) is made from the token and GITHUB_API_URL
    unless given."""
    if options.mode == "drift":  # a scheduled comparison with live, not an evaluation (drift.py)
        from .drift import run_drift

        return run_drift(env, gate, options, out=out, client=client, client_factory=client_factory)
    event = Event.from_env(env)
    mode = effective_mode(options.mode, event)
    if client is None:
        token = options.github_token or env.get("GITHUB_TOKEN", "")
        client = (client_factory or GitHubClient)(
            token, event.repository, event.api_url, comment_author=options.comment_author or None
        )
    run = ActionRun(env, gate, options, event, mode, client, ActionLog(out))
    try:
        candidates = list_changes(run)
    except GitHubError as exc:  # GitHub's API down: one line (gating.github_down)
        return github_down(run, exc)
    try:
        if sync_config(run) or mode != "apply":
            submit_candidates(run, candidates)
        record_commit(run)  # apply: what this push did for the commit (`wait --sha`)
        for p in run.problems:
            run.log.command(p.annotation())
        for path, reason in run.skipped:
            run.log.command(Problem(path, None, None, reason, "warning").annotation())
        if run.blocked:
            run.log.command(f"::error title=prompt-gate::{run.blocked}")
        reports = wait(run)
    except GATE_DOWN as exc:  # an error status, one line (gating.gate_down)
        return gate_down(run, exc)
    return publish(run, reports)


# --- 1. what changed --------------------------------------------------------------------------


def list_changes(run: ActionRun) -> list[ChangedFile]:
    """The files the pull request (or push) changes; returns the prompt files among them."""
    event, payload = run.event, run.event.payload
    if event.is_pr:
        pr = payload.get("pull_request") or {}
        run.number = int(pr.get("number") or payload.get("number"))
        run.sha = (pr.get("head") or {}).get("sha") or event.sha
        run.author = (pr.get("user") or {}).get("login") or run.env.get("GITHUB_ACTOR")
        run.changed = run.client.pull_request_files(run.number)
        run.ref = (pr.get("head") or {}).get("ref")
    else:
        run.sha = payload.get("after") or event.sha
        run.author = (payload.get("pusher") or {}).get("name") or run.env.get("GITHUB_ACTOR")
        run.changed = run.client.push_files(payload.get("before"), run.sha)
        run.ref = event.ref.removeprefix("refs/heads/")
    run.config_path = repo_path(run.options.gate_config) if run.options.gate_config else ""
    is_prompt = PathFilter(run.options.prompts, DEFAULT_PROMPTS)
    candidates = [f for f in run.changed if f.path != run.config_path and is_prompt(f.path)]
    run.log.say(
        f"prompt-gate: {event.name}, mode {run.mode}, {len(run.changed)} changed files, "
        f"{len(candidates)} matching {', '.join(split_patterns(run.options.prompts)) or DEFAULT_PROMPTS}"
    )
    return candidates


# --- 2. the gate config -----------------------------------------------------------------------


def sync_config(run: ActionRun) -> bool:
    """Sync the gate config (apply), or, on a pull request, show how it and the dataset
    files it declares differ from the gate ("takes effect after merge": the evaluation uses
    the gate's bars and data). False when it could not be read or synced: on apply nothing
    is then submitted."""
    path, mode = run.config_path, run.mode
    if not path or not (mode == "apply" or run.changed):
        return True
    full = inside_workspace(run.event.workspace, path)
    if not full.is_file():
        if mode == "apply" or any(f.path == path and f.exists for f in run.changed):
            return _config_problem(
                run,
                Problem(
                    path, None, None, "gate config not found in the checkout (did the workflow run actions/checkout?)"
                ),
            )
        return True
    try:
        cfg = gateconfig.load_config(full, display_path=path)
        if not _dataset_files_import(run, cfg):
            return mode != "apply"  # a pull request's prompts are still checked
        if is_remote(run.gate):
            result = _service_sync(run, full, cfg)
        else:
            result = (
                gateconfig.sync(cast("Gate", run.gate), cfg, commit=run.sha or None)  # not remote: the database's
                if mode == "apply"
                else _pull_request_diff(run, cfg)
            )
    except SpecError as exc:
        return _config_problem(run, problem_from(exc, path, text_or_none(full, path)))
    except GATE_DOWN:
        raise
    except GateError as exc:  # a dataset file of the pull request that cannot be read; the token's scope
        if scope_refusal(run, exc):
            return False
        return _config_problem(run, Problem(path, None, None, str(exc)))
    verb = "synced" if mode == "apply" else "would change (after merge)"
    run.log.say(f"gate config {path}: {verb}: {len(result.changes)} changes")
    keep = run.config_changed or bool(result.changes)
    run.config_result = result if keep else None
    return True


def is_remote(gate) -> bool:
    """The service's RemoteGate (gate-url), not the database's Gate: asked without importing
    the service (SQLAlchemy), which a job with gate-url never installs."""
    from gate.client.remote import RemoteGate

    return isinstance(gate, RemoteGate)


def _dataset_files_import(run: ActionRun, cfg) -> bool:
    """Every dataset file the gate config declares, read as its import would read it
    (``gateconfig.datafiles``): each that would not import is a problem on its file and
    line, naming the gate config key; on apply nothing is then synced or submitted."""
    from gate.gateconfig.datafiles import check_dataset_files

    found = check_dataset_files(cfg, run.config_path)
    for p in found:
        run.problems.append(Problem(p.file, p.line, p.key, p.reason))
    if found and run.mode == "apply":
        run.notes.append("Nothing was submitted: a dataset file of the gate config would not import.")
    return not found


def _pull_request_diff(run: ActionRun, cfg) -> gateconfig.SyncResult:
    """The pull request's gate config against the gate, with the rows of the dataset files
    it changes; when the config itself is unchanged, only those rows."""
    files = [run.event.workspace / f.path for f in run.changed if f.exists]
    result = gateconfig.diff(cast("Gate", run.gate), cfg, changed_files=files)  # not remote (sync_config)
    if run.config_changed:
        return result
    return gateconfig.SyncResult(result.path, tuple(c for c in result.changes if c.kind == "dataset-rows"))


def _service_sync(run: ActionRun, full: Path, cfg) -> gateconfig.SyncResult:
    """Through the gate's service (gate-url): on apply, the file datasets' rows are
    uploaded from this checkout and the service syncs the file's text (``gateconfig.remote``);
    on a pull request, the service diffs the config when it changed, and compares the rows
    of the dataset files the pull request changes with the gate's versions."""
    from gate.gateconfig.remote import row_changes_remote, sync_remote

    text = read_text_file(full, cfg.path)
    if run.mode == "apply":
        return sync_remote(run.gate, cfg, text, commit=run.sha or None)
    result = (
        sync_remote(run.gate, cfg, text, dry_run=True) if run.config_changed else gateconfig.SyncResult(cfg.path, ())
    )
    changed = {f.path for f in run.changed if f.exists}
    rows = row_changes_remote(run.gate, changed, lambda path: inside_workspace(run.event.workspace, path))
    return gateconfig.SyncResult(result.path, result.changes + tuple(rows))


def _config_problem(run: ActionRun, problem: Problem) -> bool:
    run.problems.append(problem)
    if run.mode == "apply":
        run.notes.append("Nothing was submitted: the gate config could not be synced, so the bars may be stale.")
    return False


# --- 3. the submissions -------------------------------------------------------------------------


def submit_candidates(run: ActionRun, candidates: Sequence[ChangedFile]) -> None:
    """Validate each changed prompt file and submit the valid, gated ones. A file's problem
    is its own: the others are still evaluated."""
    seen: dict[str, str] = {}
    for f in candidates:
        if not f.exists:
            run.skipped.append((f.path, "removed in this change: the live prompt is not touched"))
            continue
        loaded = _load_candidate(run, f)
        if loaded is None:
            continue
        spec, text = loaded
        if spec.name in seen:
            run.problems.append(
                Problem(
                    f.path,
                    field_line(text, "name"),
                    "name",
                    f"prompt {spec.name} is also defined in {seen[spec.name]}: one file per prompt",
                )
            )
            continue
        seen[spec.name] = f.path
        if run.gate.mappings(spec.name):
            _submit(run, f, spec)
        else:  # judged on the bars its pull request proposes, or a problem (gating)
            bars = proposed_bars(run, f, spec, text)
            if bars is not None:
                _submit(run, f, spec, bars)


def _load_candidate(run: ActionRun, f: ChangedFile) -> tuple[PromptSpec, str] | None:
    """The file's prompt and text, or None with its problem recorded."""
    text = None
    try:
        full = inside_workspace(run.event.workspace, f.path)
        text = read_text_file(full, f.path)  # at most the size limit is read
        return parse_spec_text(text, file=f.path), text
    except UsageError as exc:
        if isinstance(exc, SpecError):
            problem = problem_from(
                SpecError(f.path, None, NOT_CHECKED_OUT) if exc.reason == "no such file" else exc, f.path, text
            )
        else:
            problem = Problem(f.path, None, None, str(exc))
        run.problems.append(problem)
        return None


def _submit(run: ActionRun, f: ChangedFile, spec: PromptSpec, proposed: list[dict] | None = None) -> None:
    source = {"repo": run.event.repository, "pr": run.number, "sha": run.sha, "path": f.path, "author": run.author}
    if run.number is None and run.mode == "check":
        source["key"] = f"{run.event.repository}@{run.ref}"
    try:
        update_id = run.gate.submit(
            spec,
            mode=run.mode,
            source={k: v for k, v in source.items() if v is not None},
            reuse=run.options.reuse,
            full=run.options.full,
            override_rollback=run.options.override_rollback,
            proposed_bars=proposed,
        )
    except GATE_DOWN:
        raise
    except GateError as exc:  # refused (unknown provider, a held config...): this file only; or the token's scope
        if not scope_refusal(run, exc):
            run.problems.append(Problem(f.path, None, None, str(exc)))
        return
    run.ids.append(update_id)
    run.log.say(f"{f.path}: submitted {spec.name} in {run.mode} mode as update {update_id}")


# --- 4. the wait ----------------------------------------------------------------------------------


def wait(run: ActionRun) -> list[UpdateReport]:
    """The verdicts (a pending commit status meanwhile), each printed."""
    if run.ids:
        plural = "s" if len(run.ids) != 1 else ""
        _set_status(run, "pending", f"evaluating {len(run.ids)} prompt{plural}")
    opts = run.options
    reports = wait_for(run.gate, run.ids, opts.timeout, opts.run_workers, opts.concurrency, opts.samples)
    open_ids = [r.update.id for r in reports if not r.terminal]
    if open_ids:
        run.notes.append(
            f"Still running after {opts.timeout:g} s: update {', '.join(map(str, open_ids))}. "
            "The gate keeps evaluating; `promptgate wait ID` reports the verdict."
        )
    for r in reports:
        run.log.say(render_text(r))
    return reports


def wait_for(
    gate: GateAPI,
    ids: Sequence[int],
    timeout: float,
    run_workers: bool = False,
    concurrency: int | None = None,
    samples: int = 5,
) -> list[UpdateReport]:
    """Wait for the updates (running every worker role in this process with
    ``run_workers``), then their reports with ``samples`` failing items per run."""
    if not ids:
        return []
    if run_workers:
        from workers.supervisor import run_until_terminal  # the worker roles, only when asked for

        run_until_terminal(gate, ids, timeout=timeout, concurrency=concurrency)
    else:
        deadline = time.monotonic() + timeout
        for update_id in ids:
            gate.wait(update_id, timeout=max(0.0, deadline - time.monotonic()), poll=0.5)
    return [gate.status(i, failures=samples) for i in ids]


# --- 5. publishing ----------------------------------------------------------------------------------


def publish(run: ActionRun, reports: Sequence[UpdateReport]) -> int:
    """The report (file, step summary, comment), the commit status and the outputs; returns
    the exit code."""
    full, body = _render(run, reports)
    report_path = Path(
        run.options.report_path or Path(run.env.get("RUNNER_TEMP") or tempfile.gettempdir()) / REPORT_FILE
    )
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(full, encoding="utf-8")
    append_summary(run.env, full)
    _comment(run, reports, body)
    _set_status(run, *commit_state(reports, run.problems, run.options.timeout, run.blocked))
    status = overall_status(reports, run.problems, run.blocked)
    write_output(run.env, {"status": status, "tracking-ids": json.dumps(run.ids), "report-path": str(report_path)})
    code = exit_code_for(reports, run.problems, run.options.fail_on_reject, run.blocked)
    run.log.say(f"prompt-gate: {status} (exit {code})")
    return code


def _render(run: ActionRun, reports: Sequence[UpdateReport]) -> tuple[str, str]:
    """The full report (step summary, file) and the comment (within GitHub's limit)."""
    context = {
        "event": "pull_request" if run.event.is_pr else "push",
        "repo": run.event.repository,
        "pr": run.number,
        "sha": run.sha,
        "ref": run.ref,
        "mode": run.mode,
        "run_url": run.event.run_url,
        "public_url": public_url(),  # PROMPTGATE_PUBLIC_URL: each update links to its status page
        "notes": ([run.blocked] if run.blocked else []) + run.notes,
        "skipped": run.skipped,
    }
    kwargs = dict(
        validation_errors=run.problems, config_changes=run.config_result, context=context, samples=run.options.samples
    )
    full = render_markdown(reports, max_chars=STEP_SUMMARY_LIMIT, **kwargs)
    return full, full if len(full) <= GITHUB_COMMENT_LIMIT else render_markdown(reports, **kwargs)


def _comment(run: ActionRun, reports: Sequence[UpdateReport], body: str) -> None:
    superseded = bool(reports) and all(
        r.status == UpdateStatus.CANCELLED and (r.update.reason or "").startswith("superseded") for r in reports
    )
    if superseded:
        run.log.say("every update of this run was superseded by a newer submission: the comment is left to that run")
        return
    if not run.options.comment:
        return
    has_content = bool(reports or run.problems or run.skipped or run.config_result or run.blocked)
    try:
        if run.number is not None:
            comment_id, created = run.client.upsert_comment(run.number, body, create=has_content)
            if comment_id is not None:
                run.log.say(f"report comment {'created' if created else 'updated'} on #{run.number}")
        elif has_content:
            run.client.commit_comment(run.sha, body)
            run.log.say(f"report comment added to commit {run.sha[:12]}")
    except GateError as exc:
        run.log.warn(f"could not write the report comment: {exc}")


def _set_status(run: ActionRun, state: str, description: str) -> None:
    try:
        run.client.set_status(run.sha, state, description, run.event.run_url)
    except GateError as exc:
        run.log.warn(f"could not set the commit status: {exc}")
