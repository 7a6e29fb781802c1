"""`promptgate action`: the GitHub Action's entry point. Its options are made from the one
declaration of the Action's inputs (``gate.action.INPUTS``), each also read from the
``INPUT_<NAME>`` variable a composite action passes."""

from __future__ import annotations

import os

import click

from gate.action.inputs import INPUTS, MODES, ActionInput, ActionOptions
from gate.errors import UsageError
from gate.settings import DEFAULT_DATABASE_URL

from .common import TOKEN_ENV, database_option, open_database, open_gate


def _input_option(spec: ActionInput):
    envvar = spec.env_names + (["GITHUB_TOKEN"] if spec.name == "github-token" else [])
    if spec.kind == "flag":
        return click.option(f"--{spec.name}/--no-{spec.name}", spec.field, envvar=envvar, default=None, help=spec.help)
    kind: click.ParamType | type[float] | None = None  # None: click's default, as when no type is given
    if spec.kind == "mode":
        kind = click.Choice(MODES)
    elif spec.kind == "seconds":
        kind = float
    return click.option(f"--{spec.name}", spec.field, envvar=envvar, default=None, help=spec.help, type=kind)


@click.command("action")
@database_option
@click.pass_context
def action_cmd(ctx, **inputs):
    """Run the GitHub Action for the current event (reads GITHUB_* and INPUT_*)."""
    options = ActionOptions.build(**{k: v for k, v in inputs.items() if v is not None})
    if options.mode == "wait":
        ctx.exit(_release_wait(ctx, options))
    from gate.action.run import run_action  # PyGithub, only for this command

    ctx.exit(run_action(os.environ, _action_gate(ctx, options), options))


def _release_wait(ctx, options: ActionOptions) -> int:
    """mode: wait — a release job's `promptgate wait --sha $GITHUB_SHA --timeout TIMEOUT`: the
    commit's apply-mode updates or the push job's record, then the verdict (exit 0 applied,
    1 rejected or its canary rolled back, 2 failed or not gated, 3 timeout, 4 nothing to
    gate). A read token is enough; a rolled-back canary also sets the commit's status and
    comments, with the job's GitHub token (gate.action.canary_end)."""
    from gate.report.text import render_text

    sha = os.environ.get("GITHUB_SHA", "")
    if not sha:
        raise UsageError("mode wait answers for GITHUB_SHA, which is not set")
    code, reports = open_gate(ctx).wait_for_sha(
        sha, timeout=options.timeout, on_select=lambda line: click.echo(line, err=True)
    )
    for report in reports:
        click.echo(render_text(report))
    click.echo(f"prompt-gate: wait --sha {sha[:12]}: exit {code}")
    from gate.action.canary_end import ended_badly, publish_canary_end

    if ended_badly(reports):  # the push job's ✅ on the commit, corrected with this job's GitHub token
        from gate.action.workflow import ActionLog

        publish_canary_end(os.environ, options, reports, ActionLog())
    return code


def _action_gate(ctx, options: ActionOptions):
    """The gate the Action talks to: the service (gate-url + gate-token, the recommended
    setup: no database credentials in CI), else the database (database-url)."""
    obj = ctx.find_root().obj
    if obj.get("gate_url"):
        if options.run_workers:
            raise UsageError(
                "run-workers needs the gate's database (database-url): with gate-url the gate's own workers evaluate"
            )
        if not os.environ.get(TOKEN_ENV):
            raise UsageError("gate-url needs gate-token (PROMPTGATE_TOKEN): a token of submit scope")
        return open_gate(ctx)
    settings = obj["settings"]
    if not os.environ.get("PROMPTGATE_DATABASE_URL") and settings.database_url == DEFAULT_DATABASE_URL:
        raise UsageError("no gate: set the action's gate-url and gate-token inputs (or database-url)")
    return open_database(ctx)


for _spec in INPUTS:
    _input_option(_spec)(action_cmd)
