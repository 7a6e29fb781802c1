"""`promptgate demo`: the gate end to end on one machine (``demo_run``, imported when it runs)."""

from __future__ import annotations

import sys

import click


@click.command()
@click.option(
    "--database-url",
    "demo_db",
    default=None,
    metavar="URL",
    help="Run against this database instead of a temporary SQLite file.",
)
@click.option(
    "--examples",
    type=click.Path(file_okay=False, exists=True),
    default=None,
    help="The example folder (default: ./prompts-example, else the packaged copy).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown"]),
    default="text",
    show_default=True,
    help="text: the reports as `promptgate status` prints them; markdown: as the pull request's comment.",
)
def demo(demo_db, examples, fmt):
    """Show the gate end to end in under 30 s: five candidate changes, four REJECTED and one
    APPLIED.

    On a temporary database with the local model server: the example datasets and bars
    registered, the live prompts applied, then two edits of ticket-urgency (one misses the
    hard-cases bar, one clears every bar and goes live), an extraction edit that misreads
    amounts, a reply edit the judge fails and a router edit that drops the cents of amounts.
    Each gets the report its pull request would get."""
    from .demo_run import run_demo

    ok = run_demo(database_url=demo_db, examples=examples, fmt=fmt, echo=click.echo)
    sys.exit(0 if ok else 1)
