"""`promptgate prune`: retention of the evidence the gate keeps (see gate.store.retention)."""

from __future__ import annotations

import re

import click

from gate.errors import UsageError

from .common import database_option, echo_json, open_database

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """``90d``, ``12h``, ``30m``, ``45s``, ``2w`` as seconds."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text or "")
    if not found:
        raise UsageError(f"--older-than {text!r} is not an age such as 90d, 12h, 30m")
    return float(found.group(1)) * UNITS[found.group(2)]


@click.command("prune")
@database_option
@click.option("--older-than", "older_than", required=True, metavar="AGE", help="e.g. 90d, 12h (s, m, h, d, w).")
@click.option("--dry-run", is_flag=True, help="Only count what would be deleted.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def prune(ctx, older_than, dry_run, as_json):
    """Delete the item rows of runs finished before AGE, dataset versions made before it
    that nothing current or open reads, and kept answers; never the evidence of a prompt's
    live version. Update and run summaries stay. Batches of at most 5,000 rows."""
    report = open_database(ctx).prune(parse_age(older_than), dry_run=dry_run)
    if as_json:
        echo_json(vars(report))
        return
    verb = "would delete" if dry_run else "deleted"
    click.echo(
        f"{verb}: {report.items} items of {report.runs} runs, {report.versions} dataset versions "
        f"({report.version_rows} rows), {report.answers} kept answers, {report.served_reports} reports of "
        f"runtime processes, {report.feedback} rollout outcomes"
    )
