"""Commands over submissions: submit a candidate, follow it (``status``, ``wait``,
``report``), cancel it, and read a prompt's live version."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, cast

import click

from gate.errors import UsageError
from gate.settings import public_url
from gate.untrusted import terminal_safe

from .common import database_option, echo_json, is_remote, open_gate, print_report, uses_service
from .production import rollout_line, served_lines
from .progress import WaitProgress

if TYPE_CHECKING:
    from gate.prompt.spec import PromptSpec


@click.command()
@database_option
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--mode",
    type=click.Choice(["check", "apply"]),
    default="check",
    show_default=True,
    help="check: evaluate only; apply: go live when every bar clears.",
)
@click.option("--source-key", default=None, help="Submissions with the same key replace each other (check mode).")
@click.option("--sha", default=None, help="The commit this candidate comes from (for `wait --sha`).")
@click.option(
    "--reuse/--no-reuse",
    default=True,
    show_default=True,
    help="Reuse answers already paid for by the very same request; --no-reuse calls every item afresh "
    "(e.g. a model at temperature > 0).",
)
@click.option(
    "--full",
    is_flag=True,
    help="Call every item: no run of this update stops early once its verdict is "
    "settled (each mapping's early_stop is on by default).",
)
@click.option(
    "--override-rollback",
    is_flag=True,
    help="Apply a config a rollback moved away from (it is held: refused without this; admin through the service).",
)
@click.option(
    "--accept-unjudged",
    is_flag=True,
    help="Apply the first version of a compared prompt (compare: live), which no bar can judge, without a "
    "judge: it goes live shown as not judged (☑️), and `wait` exits 5 (admin; --mode apply).",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def submit(ctx, file, mode, source_key, sha, reuse, full, override_rollback, accept_unjudged, as_json):
    """Stage the prompt in FILE for evaluation; prints the tracking id (and on stderr the
    most model calls it may make)."""
    source = {"path": file, **({"key": source_key} if source_key else {}), **({"sha": sha} if sha else {})}
    options = {
        "mode": mode,
        "source": source,
        "reuse": reuse,
        "full": full,
        "override_rollback": override_rollback,
        "accept_unjudged": accept_unjudged,
    }
    update_id = _submitted(ctx, file, options)
    report = open_gate(ctx).status(update_id, failures=0)
    spend = report.spend
    if as_json:
        echo_json({"id": update_id, "prompt": report.update.prompt_name, "mode": mode, "spend": spend})
    else:
        from gate.report.text import spend_line

        click.echo(update_id)
        click.echo(f"update {update_id}: {spend_line(spend, started=False)}", err=True)


class PromptFileText(str):
    """A prompt file's text where ``RemoteGate.submit`` takes a ``PromptSpec``: its
    ``to_config()`` is the text, which the service parses as it parses a file."""

    def to_config(self) -> str:
        return str(self)


def _submitted(ctx, file: str, options: dict) -> int:
    """The update of the prompt in ``file``. On the database the file is parsed here. Through
    the service its text goes as it is, parsed there as here: the prompt's parser (Jinja2,
    YAML's templates, re2) is not imported before the submission commits; should the service
    refuse the prompt, the file is parsed here, for the error that names it."""
    if uses_service(ctx):
        from gate.prompt.text_file import read_text_file

        text = PromptFileText(read_text_file(file, file))  # a missing, too large or non-UTF-8 file: its line
        try:
            return open_gate(ctx).submit(cast("PromptSpec", text), **options)  # RemoteGate sends its to_config()
        except UsageError:
            from gate.prompt.spec import load_spec

            load_spec(file)  # the file's own error, which names it
            raise
    from gate.prompt.spec import load_spec  # jinja2, yaml, re2: only the commands that read a prompt

    spec = load_spec(file)
    return open_gate(ctx).submit(spec, **options)


@click.command()
@database_option
@click.argument("update_id", type=int)
@click.option("--json", "as_json", is_flag=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown"]),
    default=None,
    help="text (default), json (same as --json) or markdown (the pull-request report).",
)
@click.pass_context
def status(ctx, update_id, as_json, fmt):
    """Where update UPDATE_ID stands (exit 0 cleared, 1 rejected or its canary rolled back,
    2 failed/cancelled, 3 open, 5 applied not judged: an admin accepted it without a judge)."""
    report = open_gate(ctx).status(update_id)
    print_report(report, "json" if as_json else (fmt or "text"))
    ctx.exit(report.exit_code)


@click.command()
@database_option
@click.argument("update_id", type=int, required=False)
@click.option("--sha", default=None, help="Wait for every update submitted for this commit instead.")
@click.option("--prompt", "prompt_name", default=None, help="With --sha: only this prompt's updates.")
@click.option(
    "--mode",
    "sha_mode",
    type=click.Choice(["auto", "apply", "check"]),
    default=None,
    help="With --sha: apply (default) answers for the commit's apply-mode updates only, or the Action "
    "push job's record of the commit, waiting for one to appear; check asks about its checks; auto: its "
    "apply-mode updates when it has any, else its checks.",
)
@click.option("--timeout", type=float, default=None, help="Seconds to wait (default: until terminal).")
@click.option(
    "--served",
    is_flag=True,
    help="With --sha: then wait until every runtime process that reported in the last interval serves "
    "the version the commit applied (exit 1 if it was rolled back).",
)
@click.option(
    "--allow-none",
    is_flag=True,
    help="With --served: exit 0 when no runtime process that may run the prompt (a runtime token's, or one "
    "on the database) has reported; without it that exits 1.",
)
@click.option(
    "--until",
    "until",
    type=click.Choice(["promoted"]),
    default=None,
    help="Then wait until the canary rollout (of UPDATE_ID, or of the commit's updates) ends: exit 0 promoted "
    "(or no rollout), 1 rolled back or undecided, 2 superseded. Without it a canary in progress exits 0; "
    "one already rolled back or undecided exits 1.",
)
@click.option(
    "--accept-unjudged",
    is_flag=True,
    help="Exit 0, not 5, for an update applied not judged (an admin's `submit --accept-unjudged`): a release "
    "pipeline that ships such a first version says so.",
)
@click.option("--json", "as_json", is_flag=True)
@click.option(
    "--progress/--no-progress",
    "show_progress",
    default=True,
    show_default=True,
    help="While waiting for UPDATE_ID, show per dataset items scored, accuracy so far and an ETA on "
    "stderr (redrawn on a terminal, plain lines every ~10 s otherwise).",
)
@click.pass_context
def wait(
    ctx,
    update_id,
    sha,
    prompt_name,
    sha_mode,
    timeout,
    served,
    allow_none,
    until,
    accept_unjudged,
    as_json,
    show_progress,
):
    """Wait for update UPDATE_ID (or the updates of --sha) to end: exit 0 cleared, 1 rejected
    (or applied, then rolled back by its canary rollout), 2 failed/cancelled, 3 timeout, 5
    applied not judged (an admin accepted it without a judge; 0 with --accept-unjudged). With
    --sha a check never stands in for an apply (see --mode);
    it waits until the commit has an apply-mode update or the Action push job's record, then
    for the verdict: 2 also when the push job could not gate the commit, 4 nothing to gate."""
    if (update_id is None) == (sha is None):
        raise click.UsageError("give an UPDATE_ID or --sha SHA (not both)")
    if sha is None and (sha_mode is not None or served):
        raise click.UsageError("--mode and --served go with --sha")
    if sha is None:
        progress = WaitProgress.on_stderr() if show_progress else None
        # a progress line needs the report (a dozen reads), not just the status: twice a second;
        # without, one primary-key read every 0.05 s, so `wait` ends ~25 ms after the update on
        # average (through the service: a long-poll, no polling)
        gate = open_gate(ctx)
        ready_to_print(gate, update_id, "json" if as_json else "text")
        report = gate.wait(update_id, timeout=timeout, on_poll=progress, poll=0.5 if progress else 0.05)
        if progress is not None:
            progress.finish(report)
        print_report(report, "json" if as_json else "text")
        code = _accepted(report.exit_code, accept_unjudged)
        if until and applied_then(code, [report]):
            code = after_release(open_gate(ctx), [report], False, until, timeout, code)
        ctx.exit(code)
    from gate.contract.release import DEFAULT_RELEASE_MODE

    code, reports = open_gate(ctx).wait_for_sha(
        sha,
        prompt_name,
        timeout,
        mode=sha_mode or DEFAULT_RELEASE_MODE,
        on_select=lambda line: click.echo(line, err=True),
    )
    if as_json:
        echo_json([r.to_dict() for r in reports])
    else:
        for report in reports:
            print_report(report, "text")
    code = _accepted(code, accept_unjudged)
    if (served or until) and applied_then(code, reports):
        code = after_release(open_gate(ctx), reports, served, until, timeout, code, allow_none)
    ctx.exit(code)


def ready_to_print(gate, update_id: int, fmt: str) -> None:
    """What printing the report at the end needs, done while the update runs, off the time
    from its end to this command's exit: the text renderer imported; on the database, one
    report built now, which compiles the report's statements (a dozen: SQLAlchemy caches each
    per process), so the one built at the end costs its reads alone. Anything that fails here
    is met again at the end, where it is reported."""
    if fmt == "text":
        from gate.report.text import render_text  # noqa: F401 (imported for its later use)
    if is_remote(gate):
        return
    try:
        gate.status(update_id)
    except Exception:  # noqa: S110 (the wait reads the update again and says what is wrong)
        pass


def _accepted(code: int, accept_unjudged: bool) -> int:
    """`wait --accept-unjudged`: an update applied not judged (5) answers 0."""
    from gate.states import EXIT_NOT_JUDGED

    return 0 if accept_unjudged and code == EXIT_NOT_JUDGED else code


@click.command()
@database_option
@click.argument("update_id", type=int)
@click.pass_context
def cancel(ctx, update_id):
    """Cancel an open update; its results can never apply."""
    open_gate(ctx).cancel(update_id)
    click.echo(f"update {update_id}: CANCELLED")


@click.command()
@database_option
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def live(ctx, name, as_json):
    """The live config of prompt NAME and its version, what production serves of it (the
    versions and by how many processes; the stale ones named) and a canary rollout in progress."""
    gate = open_gate(ctx)
    p = gate.live(name)
    served = gate.served(name)
    rollout = next((r for r in gate.rollouts(name, 1) if r["status"] == "CANARY"), None)
    held = held_versions(gate.history(name))
    if as_json:
        echo_json(
            {
                "name": p.name,
                "version": p.version,
                "config_hash": p.config_hash,
                "applied_update_id": p.applied_update_id,
                "updated_at": p.updated_at,
                "kind": p.kind,
                "restored_version": p.restored_version,
                "actor": p.actor,
                "reason": p.reason,
                "config": p.config,
                "served": {**served, "processes": [vars(x) for x in served["processes"]]},
                "rollout": rollout,
                "holds": held,
            }
        )
    else:
        click.echo(
            terminal_safe(
                f"{p.name} v{p.version} — {p.how()} ({p.updated_at:%Y-%m-%d %H:%M:%S} UTC, "
                f"config {p.config_hash[:12]})",
                2000,
            )
        )
        for line in [rollout_line(rollout), *served_lines(served), *map(held_line, held)]:
            if line:
                click.echo(terminal_safe(line, 2000))
        click.echo(json.dumps(p.config, indent=2, ensure_ascii=True))


def held_versions(history: list[dict]) -> list[dict]:
    """The versions whose config a rollback holds (a person's or a canary's), newest first:
    an apply of one is refused unless an admin overrides."""
    return [
        {"version": row["version"], "config_hash": row["config_hash"], **row["hold"]}
        for row in history
        if row.get("hold")
    ]


def held_line(held: dict) -> str:
    return (
        f"held: v{held['version']}'s config, rolled back by {held.get('actor') or '?'} "
        f"(v{held.get('rollback_version')}): {(held.get('reason') or '').strip()}; "
        "an apply of it needs --override-rollback"
    )


def applied_then(code: int, reports) -> bool:
    """Whether a wait's answer is about what happened after the apply: every update cleared
    (0), or the only no is a canary's end (1), which `--served` / `--until` then say in their
    own words."""
    from gate.report.canary import ENDED_BADLY

    return code == 0 or (code == 1 and all(r.exit_code == 0 or r.outcome in ENDED_BADLY for r in reports))


def after_release(
    gate, reports, served: bool, until: str | None, timeout: float | None, code: int = 0, allow_none: bool = False
) -> int:
    """`wait --sha --served` / `--until promoted` once the commit's updates ended APPLIED
    (``code``: the wait's answer so far, combined with theirs)."""
    from gate.contract.after_release import wait_until_rollout_ends, wait_until_served
    from gate.contract.release import combine_exit_codes

    def say(line: str) -> None:
        click.echo(terminal_safe(line, 2000), err=True)

    after = wait_until_served(gate, reports, timeout, say, allow_none=allow_none) if served else 0
    if after == 0 and until == "promoted":
        after = wait_until_rollout_ends(gate, reports, timeout, say)
    return combine_exit_codes([code, after])


@click.command("report")
@database_option
@click.argument("update_ids", type=int, nargs=-1)
@click.option("--sha", default=None, help="The updates submitted for this commit (latest per prompt).")
@click.option(
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write to this file instead of stdout.",
)
@click.option("--marker/--no-marker", default=False, help="Start with the hidden PR-comment marker.")
@click.pass_context
def report_cmd(ctx, update_ids, sha, output, marker):
    """The Markdown report (the PR comment's format) of updates UPDATE_IDS or of --sha."""
    from gate.contract.release import latest_per_prompt
    from gate.report.markdown import render_markdown

    gate = open_gate(ctx)
    ids = list(update_ids)
    if sha:
        ids += [u.id for u in latest_per_prompt(gate.updates_for_sha(sha))]
    if not ids:
        raise UsageError("give update ids or --sha")
    text = render_markdown(
        [gate.status(i) for i in ids], context={"sha": sha, "public_url": public_url()}, marker=marker
    )
    if output:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        click.echo(text, nl=False)
