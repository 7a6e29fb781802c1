"""`promptgate db upgrade`: the schema's migrations."""

from __future__ import annotations

import click

from .common import database_option, open_database


@click.group()
def db():
    """Schema migrations."""


@db.command("upgrade")
@database_option
@click.pass_context
def db_upgrade(ctx):
    """Apply pending migrations (idempotent; safe to run concurrently)."""
    applied = open_database(ctx, check_schema=False).upgrade()
    click.echo(f"applied migrations: {', '.join(map(str, applied))}" if applied else "schema is up to date")
