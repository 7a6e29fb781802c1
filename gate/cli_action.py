"""CLI commands of the GitHub side: `promptgate sync`, `promptgate action`,
`promptgate report`. Registered on the main group by importing this module (gate/cli.py
does it at its bottom); `python -m gate.cli_action ...` runs the whole CLI too.

Thin: parse, call the library, print. Errors are GateErrors, which the group turns into
one line and exit code 2.
"""

from __future__ import annotations

import os
import sys

import click

from .cli import cli, database_option, echo_json, open_gate

_ACTION_ENV = {name: [f"INPUT_{name.upper().replace('-', '_')}", f"INPUT_{name.upper()}"]
               for name in ("prompts", "gate-config", "mode", "run-workers", "timeout", "fail-on-reject",
                            "comment", "github-token", "report-path", "comment-author")}


@cli.command("sync")
@database_option
@click.argument("gate_config", metavar="GATE_CONFIG", type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="Only show what would change.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def sync_cmd(ctx, gate_config, dry_run, as_json):
    """Make the gate's datasets and bars match GATE_CONFIG (idempotent). Mappings the file
    does not declare are removed: the file is the whole truth for the gate's bars."""
    from . import gateconfig
    gate = open_gate(ctx)
    cfg = gateconfig.load_config(gate_config)
    result = gateconfig.diff(gate, cfg) if dry_run else gateconfig.sync(gate, cfg)
    if as_json:
        echo_json({"path": result.path, "applied": result.applied,
                   "changes": [{"kind": c.kind, "subject": c.subject, "before": c.before, "after": c.after,
                                "text": str(c)} for c in result.changes]})
        return
    if not result.changes:
        click.echo(f"{gate_config}: the gate already matches")
    for line in result.lines():
        click.echo(("would: " if dry_run else "") + line)


@cli.command("action")
@database_option
@click.option("--prompts", envvar=_ACTION_ENV["prompts"], default=None,
              help="Globs of prompt files, one per line; ! excludes (default prompts/**/*.yaml).")
@click.option("--gate-config", envvar=_ACTION_ENV["gate-config"], default=None,
              help="Repository path of the gate config (datasets and bars).")
@click.option("--mode", envvar=_ACTION_ENV["mode"], type=click.Choice(["auto", "check", "apply"]), default=None,
              help="auto: check on pull requests, apply on a push to the default branch.")
@click.option("--run-workers/--no-run-workers", envvar=_ACTION_ENV["run-workers"], default=None,
              help="Run the workers in this process while waiting.")
@click.option("--timeout", envvar=_ACTION_ENV["timeout"], type=float, default=None, help="Seconds to wait (default 600).")
@click.option("--fail-on-reject/--no-fail-on-reject", envvar=_ACTION_ENV["fail-on-reject"], default=None,
              help="Exit 1 when a candidate is rejected (default on).")
@click.option("--comment/--no-comment", envvar=_ACTION_ENV["comment"], default=None,
              help="Write the report as a PR or commit comment (default on).")
@click.option("--github-token", envvar=_ACTION_ENV["github-token"] + ["GITHUB_TOKEN"], default=None,
              help="Token for the GitHub API (the workflow's GITHUB_TOKEN).")
@click.option("--report-path", envvar=_ACTION_ENV["report-path"], default=None,
              help="Where to write the Markdown report (default $RUNNER_TEMP/prompt-gate-report.md).")
@click.option("--comment-author", envvar=_ACTION_ENV["comment-author"], default=None,
              help="Login of the report comment's author (default: the token's user, or github-actions[bot]).")
@click.pass_context
def action_cmd(ctx, prompts, gate_config, mode, run_workers, timeout, fail_on_reject, comment, github_token,
               report_path, comment_author):
    """Run the GitHub Action for the current event (reads GITHUB_* and INPUT_*)."""
    from .action import ActionOptions, run_action
    from .errors import UsageError
    settings = ctx.find_root().obj["settings"]
    if not os.environ.get("PROMPTGATE_DATABASE_URL") and settings.database_url == "sqlite:///promptgate.db":
        raise UsageError("no gate database: set the action's database-url input (PROMPTGATE_DATABASE_URL)")
    options = ActionOptions.build(**{k: v for k, v in dict(
        prompts=prompts, gate_config=gate_config, mode=mode, run_workers=run_workers, timeout=timeout,
        fail_on_reject=fail_on_reject, comment=comment, github_token=github_token,
        report_path=report_path, comment_author=comment_author).items() if v is not None})
    ctx.exit(run_action(os.environ, open_gate(ctx), options))


@cli.command("report")
@database_option
@click.argument("update_ids", type=int, nargs=-1)
@click.option("--sha", default=None, help="The updates submitted for this commit (latest per prompt).")
@click.option("--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write to this file instead of stdout.")
@click.option("--marker/--no-marker", default=False, help="Start with the hidden PR-comment marker.")
@click.pass_context
def report_cmd(ctx, update_ids, sha, output, marker):
    """The Markdown report (the PR comment's format) of updates UPDATE_IDS or of --sha."""
    from .action import _latest_per_prompt
    from .errors import UsageError
    from .markdown import render_markdown
    gate = open_gate(ctx)
    ids = list(update_ids)
    if sha:
        ids += [u.id for u in _latest_per_prompt(gate.updates_for_sha(sha))]
    if not ids:
        raise UsageError("give update ids or --sha")
    text = render_markdown([gate.status(i) for i in ids], context={"sha": sha}, marker=marker)
    if output:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        click.echo(text, nl=False)


if __name__ == "__main__":
    from .cli import main
    sys.exit(main())
