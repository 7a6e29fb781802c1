"""`promptgate action`: the GitHub Action's logic, thin over the service API.

On a **pull request** (mode check): list the files the PR changes (PyGithub), keep the
ones the ``prompts`` globs match, validate each (problems become ``::error`` annotations
and a section of the report), submit the valid ones in check mode with source = repo, PR,
head SHA, path, author, wait (running the workers in-process with ``run-workers``), render
the report, upsert the PR's one report comment, set the ``prompt-gate`` commit status on
the head SHA, write the outputs and the step summary. A changed gate config is **not**
synced: its diff is shown as "takes effect after merge" and the bars in the database are
the ones that count (a pull request cannot lower its own bar).

On a **push to the default branch** (mode apply): sync the gate config first, then submit
the prompts the push changed in apply mode and report the same way (a commit comment and
the step summary). A push to another branch is evaluated in check mode.

Exit codes: 0 every candidate cleared (or nothing to evaluate), 1 a candidate was rejected
(only with fail-on-reject), 2 an invalid file, a failed or cancelled update, or an error,
3 still running when the timeout passed. The commit status reports the verdict whatever
fail-on-reject says.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TextIO

import yaml

from . import gateconfig
from .errors import GateError, NotFound, SpecError, UsageError
from .markdown import GITHUB_COMMENT_LIMIT, STEP_SUMMARY_LIMIT, render_markdown
from .service import Gate, UpdateReport
from .spec import parse_spec_text
from .yamlfile import UntrustedLoader, read_text_file
from .states import EXIT_CODES, UpdateStatus
from .untrusted import workflow_lines

DEFAULT_PROMPTS = "prompts/**/*.yaml"
PR_EVENTS = ("pull_request",)
# Events that run with the base repository's secrets while a fork's code is checked out:
# the workflow would hand the gate's database URL and tokens to that code.
SECRET_EVENTS_ON_FORK_CODE = ("pull_request_target", "workflow_run")
SECURITY_DOCS = "https://docs.github.com/en/actions/reference/events-that-trigger-workflows#pull_request_target"
REPORT_FILE = "prompt-gate-report.md"


# --- options -------------------------------------------------------------------------------------

def parse_bool(value: Any, name: str = "value") -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise UsageError(f"{name} {value!r} is not true or false")


@dataclass(frozen=True)
class ActionOptions:
    """The inputs of action.yml (see ``from_env`` for their INPUT_* names)."""
    prompts: str = DEFAULT_PROMPTS           # globs, one per line; a leading ! excludes
    gate_config: str = ""                    # repository-relative path of the gate config
    mode: str = "auto"                       # auto | check | apply
    run_workers: bool = False
    timeout: float = 600.0
    fail_on_reject: bool = True
    comment: bool = True
    github_token: str = ""
    report_path: str = ""                    # default: $RUNNER_TEMP/prompt-gate-report.md
    samples: int = 5                         # failing items shown per dataset
    concurrency: int | None = None           # model calls in flight with run-workers
    comment_author: str = ""                 # our comments' login; default: the token's user

    INPUTS = ("prompts", "gate-config", "mode", "run-workers", "timeout", "fail-on-reject", "comment",
              "github-token", "report-path", "comment-author")

    @classmethod
    def from_env(cls, env: Mapping[str, str], **overrides) -> "ActionOptions":
        """INPUT_<NAME> with - or _ (INPUT_GATE_CONFIG or INPUT_GATE-CONFIG), then overrides."""
        raw: dict[str, Any] = {}
        for name in cls.INPUTS:
            for key in (f"INPUT_{name.upper().replace('-', '_')}", f"INPUT_{name.upper()}"):
                if env.get(key, "").strip():
                    raw[name.replace("-", "_")] = env[key].strip()
                    break
        raw.update({k: v for k, v in overrides.items() if v is not None})
        return cls.build(**raw)

    @classmethod
    def build(cls, **raw) -> "ActionOptions":
        values: dict[str, Any] = {}
        for key, value in raw.items():
            if key in ("run_workers", "fail_on_reject", "comment"):
                values[key] = parse_bool(value, key.replace("_", "-"))
            elif key == "timeout":
                try:
                    values[key] = float(value)
                except (TypeError, ValueError):
                    raise UsageError(f"timeout {value!r} is not a number of seconds") from None
                if values[key] <= 0:
                    raise UsageError("timeout must be a positive number of seconds")
            elif key == "mode":
                if str(value) not in ("auto", "check", "apply"):
                    raise UsageError(f"mode {value!r} is not auto, check or apply")
                values[key] = str(value)
            else:
                values[key] = value
        return cls(**values)


# --- globs ---------------------------------------------------------------------------------------

def _expand_braces(pattern: str) -> list[str]:
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    out = []
    for alt in m.group(1).split(","):
        out += _expand_braces(pattern[:m.start()] + alt + pattern[m.end():])
    return out


def compile_glob(pattern: str) -> re.Pattern:
    """A path glob: ``*`` and ``?`` stay inside one folder, ``**`` spans folders
    (``a/**/b`` matches a/b, a/x/b, a/x/y/b; a trailing ``/**`` matches everything below),
    ``[...]`` is a character class and ``{a,b}`` alternatives."""
    alternatives = []
    for pat in _expand_braces(pattern.strip().lstrip("/")):
        while pat.startswith("./"):
            pat = pat[2:]
        i, out = 0, []
        while i < len(pat):
            if pat.startswith("**/", i) and (i == 0 or pat[i - 1] == "/"):
                out.append("(?:[^/]+/)*")
                i += 3
            elif pat.startswith("/**", i) and i + 3 == len(pat):
                out.append("(?:/.*)?")
                i += 3
            elif pat.startswith("**", i):
                out.append(".*")
                i += 2
            elif pat[i] == "*":
                out.append("[^/]*")
                i += 1
            elif pat[i] == "?":
                out.append("[^/]")
                i += 1
            elif pat[i] == "[" and "]" in pat[i + 2:]:
                end = pat.index("]", i + 2)
                body = pat[i + 1:end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
            else:
                out.append(re.escape(pat[i]))
                i += 1
        alternatives.append("".join(out))
    return re.compile("^(?:" + "|".join(alternatives) + ")$")


def split_patterns(patterns: str | Sequence[str]) -> list[str]:
    if isinstance(patterns, str):
        patterns = patterns.splitlines()
    return [p.strip() for p in patterns if p.strip() and not p.strip().startswith("#")]


class PathFilter:
    """Globs, one per line; a path matches when one pattern matches it and no ``!``
    pattern does."""

    def __init__(self, patterns: str | Sequence[str]):
        items = split_patterns(patterns) or [DEFAULT_PROMPTS]
        self.include = [compile_glob(p) for p in items if not p.startswith("!")]
        self.exclude = [compile_glob(p[1:]) for p in items if p.startswith("!")]

    def __call__(self, path: str) -> bool:
        path = path.lstrip("/")
        return any(r.match(path) for r in self.include) and not any(r.match(path) for r in self.exclude)


def glob_filter(paths: Iterable[str], patterns: str | Sequence[str]) -> list[str]:
    match = PathFilter(patterns)
    return [p for p in paths if match(p)]


# --- problems and annotations ----------------------------------------------------------------------

@dataclass(frozen=True)
class Problem:
    """An invalid file: an ::error annotation and a row of the report."""
    file: str
    line: int | None
    field: str | None
    reason: str
    severity: str = "error"

    def annotation(self) -> str:
        props = f"file={_prop(self.file)}"
        if self.line:
            props += f",line={self.line}"
        props += ",title=prompt-gate"
        where = f"{self.field}: " if self.field else ""
        return f"::{self.severity} {props}::{_data(where + self.reason)}"


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


_YAML_LINE = re.compile(r"line (\d+), column \d+")
_FIELD_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def field_line(text: str, field: str | None) -> int | None:
    """The 1-based line of a field path such as ``messages[0].content`` in a YAML
    text (the deepest part that exists), or None."""
    if not field:
        return None
    try:
        node = yaml.compose(text, Loader=UntrustedLoader)   # no aliases, bounded nesting
    except yaml.YAMLError:
        return None
    line = None
    for m in _FIELD_PART.finditer(field):
        key, index = m.group(1), m.group(2)
        if isinstance(node, yaml.MappingNode) and key is not None:
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == key:
                    line, node = k.start_mark.line + 1, v
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and index is not None and int(index) < len(node.value):
            node = node.value[int(index)]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def problem_from(exc: SpecError, path: str, text: str | None) -> Problem:
    line = None
    m = _YAML_LINE.search(exc.reason or "")
    if m:
        line = int(m.group(1))
    elif text is not None:
        line = field_line(text, exc.field)
    return Problem(path, line, exc.field, exc.reason)


# --- results -------------------------------------------------------------------------------------

def combine_exit_codes(codes: Iterable[int]) -> int:
    """2 (failed, cancelled, invalid) before 1 (rejected) before 3 (still open) before 0."""
    codes = set(codes)
    for code in (2, 1, 3):
        if code in codes:
            return code
    return 0


def overall_status(reports: Sequence[UpdateReport], problems: Sequence[Problem]) -> str:
    """The `status` output: failed, cancelled, invalid, rejected, timeout, applied, passed or skipped."""
    statuses = {r.status for r in reports}
    if UpdateStatus.FAILED in statuses:
        return "failed"
    if UpdateStatus.CANCELLED in statuses:
        return "cancelled"
    if any(p.severity == "error" for p in problems):
        return "invalid"
    if UpdateStatus.REJECTED in statuses:
        return "rejected"
    if statuses & {UpdateStatus.PENDING, UpdateStatus.RUNNING}:
        return "timeout"
    if UpdateStatus.APPLIED in statuses:
        return "applied"
    if UpdateStatus.PASSED in statuses:
        return "passed"
    return "skipped"


def exit_code_for(reports: Sequence[UpdateReport], problems: Sequence[Problem], fail_on_reject: bool = True) -> int:
    codes = [EXIT_CODES[UpdateStatus(r.status)] for r in reports]
    if any(p.severity == "error" for p in problems):
        codes.append(2)
    if not fail_on_reject:
        codes = [0 if c == 1 else c for c in codes]
    return combine_exit_codes(codes)


def commit_state(reports: Sequence[UpdateReport], problems: Sequence[Problem], timeout: float) -> tuple[str, str]:
    """(state, description) of the prompt-gate commit status."""
    status = overall_status(reports, problems)
    n_err = sum(1 for p in problems if p.severity == "error")
    by = {}
    for r in reports:
        by.setdefault(r.status, []).append(r.update.prompt_name)
    if status == "skipped":
        return "success", "no gated prompt changed"
    if status == "failed":
        return "error", f"could not be scored: {', '.join(by[UpdateStatus.FAILED])}"
    if status == "cancelled":
        return "error", f"cancelled (superseded?): {', '.join(by[UpdateStatus.CANCELLED])}"
    if status == "invalid":
        return "failure", f"{n_err} invalid prompt file{'s' if n_err != 1 else ''}"
    if status == "rejected":
        return "failure", f"rejected: {', '.join(by[UpdateStatus.REJECTED])}"
    if status == "timeout":
        return "error", f"still running after {timeout:g}s; see `promptgate wait`"
    word = "applied" if status == "applied" else "passed"
    return "success", f"{len(reports)} prompt{'s' if len(reports) != 1 else ''} {word} every bar"


# --- waiting -------------------------------------------------------------------------------------

def wait_for(gate: Gate, ids: Sequence[int], timeout: float, run_workers: bool = False,
             concurrency: int | None = None, samples: int = 5) -> list[UpdateReport]:
    """Wait for the updates (running every worker role in this process with
    ``run_workers``), then their reports with ``samples`` failing items per run."""
    if not ids:
        return []
    if run_workers:
        from workers.supervisor import run_until_terminal
        run_until_terminal(gate, ids, timeout=timeout, concurrency=concurrency)
    else:
        deadline = time.monotonic() + timeout
        for update_id in ids:
            gate.wait(update_id, timeout=max(0.0, deadline - time.monotonic()), poll=0.5)
    return [gate.status(i, failures=samples) for i in ids]


def _latest_per_prompt(updates) -> list:
    latest = {}
    for u in updates:
        if u.prompt_name not in latest or u.id > latest[u.prompt_name].id:
            latest[u.prompt_name] = u
    return sorted(latest.values(), key=lambda u: u.id)


def wait_for_sha(gate: Gate, sha: str, prompt: str | None = None, timeout: float | None = None,
                 poll: float = 0.5) -> tuple[int, list[UpdateReport]]:
    """For release pipelines: wait for the updates submitted for commit ``sha`` (the
    latest one per prompt; a re-run's submission replaces the earlier one) and return
    (exit code as `wait ID` gives it, combined: 2 before 1 before 3 before 0; reports).

    Until an update for the commit appears, it is waited for up to ``timeout``; with no
    timeout, or when none appears in time, NotFound is raised."""
    sha = (sha or "").strip()
    if not re.fullmatch(r"[0-9a-fA-F]{7,64}", sha):
        raise UsageError(f"{sha!r} is not a commit SHA")
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        updates = _latest_per_prompt(gate.updates_for_sha(sha, prompt))
        expired = deadline is not None and time.monotonic() >= deadline
        if updates:
            reports = [gate.status(u.id) for u in updates]
            if expired or all(r.terminal for r in reports):
                return combine_exit_codes(r.exit_code for r in reports), reports
        elif deadline is None or expired:
            what = f" for prompt {prompt}" if prompt else ""
            raise NotFound(f"no update was submitted for commit {sha}{what} (wait needs the full SHA the "
                           "Action or `promptgate submit --sha` used)")
        wait = poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic()))
        time.sleep(wait)


# --- GitHub environment ----------------------------------------------------------------------------

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
    def from_env(cls, env: Mapping[str, str]) -> "Event":
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
        return cls(name=name, payload=payload, repository=repository, sha=env.get("GITHUB_SHA", ""),
                   ref=env.get("GITHUB_REF", ""), workspace=Path(env.get("GITHUB_WORKSPACE") or os.getcwd()),
                   run_url=run_url, api_url=env.get("GITHUB_API_URL") or None)

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
        raise UsageError(f"event {event.name} runs with secrets on a fork's code: run prompt-gate on pull_request "
                         f"(see docs/security.md and {SECURITY_DOCS})")
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


# --- the action ----------------------------------------------------------------------------------

def _repo_path(path: str) -> str:
    path = path.strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


def _text_or_none(path: Path, display: str) -> str | None:
    """The file's text for locating a problem's line (None when it cannot be read within
    the size limit)."""
    try:
        return read_text_file(path, display)
    except SpecError:
        return None


def _inside(workspace: Path, rel: str) -> Path:
    full = (workspace / rel).resolve()
    if workspace.resolve() not in full.parents and full != workspace.resolve():
        raise UsageError(f"{rel}: outside the workspace")
    return full


def run_action(env: Mapping[str, str], gate: Gate, options: ActionOptions, *, out: TextIO | None = None,
               client=None, client_factory: Callable[..., Any] | None = None) -> int:
    """Run the Action for the event described by ``env`` (GITHUB_*). Returns the exit code.
    ``client`` (a gate.github.GitHubClient) is made from the token and GITHUB_API_URL
    unless given."""
    out = out or sys.stdout

    def say(line: str) -> None:
        """A plain log line that may hold untrusted text: no line of it can be a workflow command."""
        print(workflow_lines(line), file=out, flush=True)

    def command(line: str) -> None:
        """A workflow command we built (its values escaped by ``_data`` / ``_prop``)."""
        print(line, file=out, flush=True)

    def warn(message: str) -> None:
        command(f"::warning title=prompt-gate::{_data(message)}")

    event = Event.from_env(env)
    mode = effective_mode(options.mode, event)
    if client is None:
        from .github import GitHubClient
        token = options.github_token or env.get("GITHUB_TOKEN", "")
        client = (client_factory or GitHubClient)(token, event.repository, event.api_url,
                                                  comment_author=options.comment_author or None)

    # 1. what changed
    if event.is_pr:
        pr = event.payload.get("pull_request") or {}
        number = int(pr.get("number") or event.payload.get("number"))
        sha = (pr.get("head") or {}).get("sha") or event.sha
        author = (pr.get("user") or {}).get("login") or env.get("GITHUB_ACTOR")
        changed = client.pull_request_files(number)
        ref = (pr.get("head") or {}).get("ref")
    else:
        number = None
        sha = event.payload.get("after") or event.sha
        author = (event.payload.get("pusher") or {}).get("name") or env.get("GITHUB_ACTOR")
        changed = client.push_files(event.payload.get("before"), sha)
        ref = event.ref.removeprefix("refs/heads/")
    config_path = _repo_path(options.gate_config) if options.gate_config else ""
    is_prompt = PathFilter(options.prompts)
    candidates = [f for f in changed if f.path != config_path and is_prompt(f.path)]
    config_changed = bool(config_path) and any(f.path == config_path for f in changed)
    say(f"prompt-gate: {event.name}, mode {mode}, {len(changed)} changed files, "
        f"{len(candidates)} matching {', '.join(split_patterns(options.prompts)) or DEFAULT_PROMPTS}")

    problems: list[Problem] = []
    skipped: list[tuple[str, str]] = []
    notes: list[str] = []
    config_result = None

    # 2. the gate config: synced on apply, only diffed on a pull request
    config_ok = True
    if config_path and (mode == "apply" or config_changed):
        full = _inside(event.workspace, config_path)
        if not full.is_file():
            if mode == "apply" or any(f.path == config_path and f.exists for f in changed):
                problems.append(Problem(config_path, None, None, "gate config not found in the checkout "
                                        "(did the workflow run actions/checkout?)"))
                config_ok = False
        else:
            try:
                cfg = gateconfig.load_config(full, display_path=config_path)
                config_result = gateconfig.sync(gate, cfg) if mode == "apply" else gateconfig.diff(gate, cfg)
                verb = "synced" if mode == "apply" else "would change (after merge)"
                say(f"gate config {config_path}: {verb}: {len(config_result.changes)} changes")
                if mode == "apply" and not config_changed and not config_result.changes:
                    config_result = None
            except SpecError as exc:
                problems.append(problem_from(exc, config_path, _text_or_none(full, config_path)))
                config_ok = False
    if not config_ok and mode == "apply":
        notes.append("Nothing was submitted: the gate config could not be synced, so the bars may be stale.")

    # 3. validate and submit
    ids: list[int] = []
    if config_ok or mode != "apply":
        seen: dict[str, str] = {}
        for f in candidates:
            if not f.exists:
                skipped.append((f.path, "removed in this change: the live prompt is not touched"))
                continue
            try:
                full = _inside(event.workspace, f.path)
            except UsageError as exc:
                problems.append(Problem(f.path, None, None, str(exc)))
                continue
            text = None
            try:
                text = read_text_file(full, f.path)      # at most the size limit is read
                spec = parse_spec_text(text, file=f.path)
            except SpecError as exc:
                if exc.reason == "no such file":
                    exc = SpecError(f.path, None, "not in the checkout (did the workflow run actions/checkout?)")
                problems.append(problem_from(exc, f.path, text))
                continue
            if spec.name in seen:
                problems.append(Problem(f.path, field_line(text, "name"), "name",
                                        f"prompt {spec.name} is also defined in {seen[spec.name]}: one file per prompt"))
                continue
            seen[spec.name] = f.path
            if not gate.mappings(spec.name):
                where = f" in {config_path}" if config_path else ""
                later = " (the bars this change declares take effect after merge)" if config_changed and mode == "check" else ""
                skipped.append((f.path, f"prompt {spec.name} is not gated: no dataset is mapped to it; declare its "
                                        f"bars{where}{later}"))
                continue
            source = {"repo": event.repository, "pr": number, "sha": sha, "path": f.path, "author": author}
            if number is None and mode == "check":
                source["key"] = f"{event.repository}@{ref}"
            try:
                update_id = gate.submit(spec, mode=mode, source={k: v for k, v in source.items() if v is not None})
            except GateError as exc:      # refused (unknown provider, no bar...): this file only
                problems.append(Problem(f.path, None, None, str(exc)))
                continue
            ids.append(update_id)
            say(f"{f.path}: submitted {spec.name} in {mode} mode as update {update_id}")

    for p in problems:
        command(p.annotation())
    for path, reason in skipped:
        command(Problem(path, None, None, reason, "warning").annotation())

    # 4. wait
    if ids:
        try:
            client.set_status(sha, "pending", f"evaluating {len(ids)} prompt{'s' if len(ids) != 1 else ''}",
                              event.run_url)
        except GateError as exc:
            warn(f"could not set the commit status: {exc}")
    reports = wait_for(gate, ids, options.timeout, options.run_workers, options.concurrency, options.samples)
    open_ids = [r.update.id for r in reports if not r.terminal]
    if open_ids:
        notes.append(f"Still running after {options.timeout:g} s: update {', '.join(map(str, open_ids))}. "
                     "The gate keeps evaluating; `promptgate wait ID` reports the verdict.")
    from .report import render_text
    for r in reports:
        say(render_text(r))

    # 5. report
    context = {"event": "pull_request" if event.is_pr else "push", "repo": event.repository, "pr": number,
               "sha": sha, "ref": ref, "mode": mode, "run_url": event.run_url, "notes": notes, "skipped": skipped}
    # the full report for the step summary and the file; the comment within GitHub's limit
    full = render_markdown(reports, validation_errors=problems, config_changes=config_result, context=context,
                           samples=options.samples, max_chars=STEP_SUMMARY_LIMIT)
    body = full if len(full) <= GITHUB_COMMENT_LIMIT else render_markdown(
        reports, validation_errors=problems, config_changes=config_result, context=context, samples=options.samples)
    report_path = Path(options.report_path or Path(env.get("RUNNER_TEMP") or tempfile.gettempdir()) / REPORT_FILE)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(full, encoding="utf-8")
    append_summary(env, full)

    has_content = bool(reports or problems or skipped or config_result)
    superseded = bool(reports) and all(r.status == UpdateStatus.CANCELLED and
                                       (r.update.reason or "").startswith("superseded") for r in reports)
    if options.comment and not superseded:
        try:
            if number is not None:
                comment_id, created = client.upsert_comment(number, body, create=has_content)
                if comment_id is not None:
                    say(f"report comment {'created' if created else 'updated'} on #{number}")
            elif has_content:
                client.commit_comment(sha, body)
                say(f"report comment added to commit {sha[:12]}")
        except GateError as exc:
            warn(f"could not write the report comment: {exc}")
    elif superseded:
        say("every update of this run was superseded by a newer submission: the comment is left to that run")
    state, description = commit_state(reports, problems, options.timeout)
    try:
        client.set_status(sha, state, description, event.run_url)
    except GateError as exc:
        warn(f"could not set the commit status: {exc}")

    status = overall_status(reports, problems)
    write_output(env, {"status": status, "tracking-ids": json.dumps(ids), "report-path": str(report_path)})
    code = exit_code_for(reports, problems, options.fail_on_reject)
    say(f"prompt-gate: {status} (exit {code})")
    return code


__all__ = ["ActionOptions", "Event", "PathFilter", "Problem", "combine_exit_codes", "commit_state",
           "compile_glob", "effective_mode", "exit_code_for", "field_line", "glob_filter", "overall_status",
           "run_action", "wait_for", "wait_for_sha"]
