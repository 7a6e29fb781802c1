"""A prompt's live versions: ``history`` (every version, newest first, with the update that
applied it or the rollback that restored it) and ``rollback`` (an earlier version live
again, at once, without evaluation: it cleared its bars when it first went live)."""

from __future__ import annotations

import os

import click

from gate.untrusted import terminal_safe
from gate.verdict.scoring import format_bar, format_pct

from .common import database_option, echo_json, open_gate


def default_actor() -> str:
    """Who is rolling back: PROMPTGATE_ACTOR, else user@host."""
    import getpass
    import socket

    return os.environ.get("PROMPTGATE_ACTOR") or f"{getpass.getuser()}@{socket.gethostname()}"


@click.command()
@database_option
@click.argument("name")
@click.option(
    "--to",
    "to_version",
    type=click.IntRange(min=1),
    default=None,
    help="The version to make live again (default: the one before the live one).",
)
@click.option(
    "--if-live",
    "seen_version",
    type=click.IntRange(min=1),
    default=None,
    help="Only if this is still the live version (the one you looked at): a fix that went live "
    "meanwhile, or a rollback someone else just made, is not undone.",
)
@click.option("--reason", required=True, help="Why (kept in the history).")
@click.option("--actor", default=None, help="Who (default: $PROMPTGATE_ACTOR, else user@host).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def rollback(ctx, name, to_version, seen_version, reason, actor, as_json):
    """Make an earlier version of prompt NAME live again, as a new version. Open apply-mode
    updates of NAME are cancelled (they were judged against a version no longer live)."""
    done = open_gate(ctx).rollback(
        name, reason=reason, actor=actor or default_actor(), to_version=to_version, seen_version=seen_version
    )
    if as_json:
        echo_json({"prompt": name, **done})
        return
    click.echo(f"{name}: version {done['version']} is live (the config of version {done['restored_version']})")
    if done.get("held", True):  # nothing is held when the config restored is the live one's
        click.echo(
            f"{name}: the config rolled back away from is held: an apply of it is refused unless it overrides the "
            "rollback (`submit --override-rollback`, admin)"
        )
    for update_id in done["cancelled"]:
        click.echo(f"update {update_id}: CANCELLED (judged against a version no longer live)")


@click.command()
@database_option
@click.argument("name")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def history(ctx, name, limit, as_json):
    """Every live version of prompt NAME, newest first: the update that applied it (its
    verdict, commit, pull request) or the rollback that restored it (who, when, why)."""
    rows = open_gate(ctx).history(name, limit)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo(f"prompt {terminal_safe(name)} has never been live")
    for i, row in enumerate(rows):
        click.echo(terminal_safe(history_line(row, live=i == 0), 2000))


def history_line(row: dict, live: bool = False) -> str:
    return _version_line(row, live) + hold_text(row.get("hold"))


def hold_text(hold: dict | None) -> str:
    """A held version's note: the rollback that moved away from it (who, when, why)."""
    if not hold:
        return ""
    when = f"{hold['at']:%Y-%m-%d %H:%M} UTC" if hasattr(hold.get("at"), "strftime") else str(hold.get("at"))
    return (
        f"  [held: rolled back by {hold.get('actor') or '?'} at {when} (v{hold.get('rollback_version')}): "
        f"{(hold.get('reason') or '').strip()}; an apply of this config needs --override-rollback]"
    )


def _version_line(row: dict, live: bool) -> str:
    head = f"v{row['version']}{' (live)' if live else ''}  {row['applied_at']:%Y-%m-%d %H:%M:%S}  "
    if row.get("kind") == "rollback":
        by_rollout = row.get("by_rollout")
        return head + (
            f"rollback to v{row['restored_version']} by {row.get('actor') or '?'}: {(row.get('reason') or '').strip()}"
            + (f"  (rollout {by_rollout['id']} {by_rollout['status']})" if by_rollout else "")
        )
    upd = row.get("update")
    if upd is None:
        return head + f"update {row.get('update_id')}"
    where = " ".join(
        filter(
            None, [f"commit {upd['sha'][:12]}" if upd.get("sha") else "", f"PR #{upd['pr']}" if upd.get("pr") else ""]
        )
    )
    if upd.get("not_judged"):  # no figure about what nothing judged (gate.report.unjudged)
        runs, status = "", f"{upd['status']}, ☑️ not judged (accepted by an admin without a judge)"
    else:
        runs, status = ", ".join(_run_text(r) for r in upd["runs"]), upd["status"]
    line = head + f"update {upd['id']} {status}" + (f"  {where}" if where else "") + (f"  {runs}" if runs else "")
    if upd.get("override_rollback"):
        line += "  (applied over a rollback's hold: --override-rollback)"
    rollout = row.get("rollout")
    if rollout:
        line += f"  canary {rollout['status']}" + (f": {rollout['reason']}" if rollout.get("reason") else "")
    return line


def _run_text(run: dict) -> str:
    if not run.get("scored"):
        return f"{run['dataset']} {run['status']}"
    return (
        f"{run['dataset']} {run['matches']}/{run['scored']} "
        f"({format_pct(run['matches'], run['scored'], run['bar'])}, bar {format_bar(run['bar'])})"
    )
