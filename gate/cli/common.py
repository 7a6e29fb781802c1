"""What every command shares: the error boundary (a GateError is one line on stderr and
its exit code; no traceback reaches a user), the gate handle of the invocation (the
database's ``Gate``, or the service's ``RemoteGate`` with a gate URL: see ``TARGET_HELP``),
``--database-url`` and ``--gate-url`` accepted after the subcommand too, JSON output and
report printing."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gate.errors import GateError, UsageError
from gate.settings import DEFAULT_DATABASE_URL, Settings, misspelt_target
from gate.untrusted import terminal_safe

if TYPE_CHECKING:  # the database's Gate loads SQLAlchemy: imported where a command opens it
    from gate.contract.shape import GateAPI
    from gate.domain import Gate
    from gate.report.update import UpdateReport


class GateGroup(click.Group):
    """Maps library errors to one line and an exit code; no tracebacks for user mistakes.
    The domain API raises only GateError (a driver error arrives as a DatabaseError)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except GateError as exc:
            click.echo(f"error: {terminal_safe(exc)}", err=True)
            ctx.exit(exc.exit_code)


def echo_json(data) -> None:
    click.echo(json.dumps(data, indent=2, default=str, ensure_ascii=True))


TARGET_HELP = (
    "The gate's service (PROMPTGATE_URL; token in PROMPTGATE_TOKEN) instead of its database. "
    "Given on the command line, --gate-url or --database-url is the one used (not both); else "
    "PROMPTGATE_URL wins over PROMPTGATE_DATABASE_URL."
)
TOKEN_ENV = "PROMPTGATE_TOKEN"
CLIENT_MODULE = "gate.client.remote"  # RemoteGate


def open_gate(ctx: click.Context, check_schema: bool = True) -> GateAPI:
    """The gate of this invocation: the service's ``RemoteGate`` when a gate URL is in
    force, else the database's ``Gate``: both are a ``GateAPI`` (the same methods, the same
    answers)."""
    obj = ctx.find_root().obj
    if "gate" not in obj:
        if not _uses_service(obj):
            return open_database(ctx, check_schema)
        from gate.client.remote import RemoteGate  # the HTTP client is imported only when the service is used

        gate = obj["gate"] = RemoteGate(obj["gate_url"], os.environ.get(TOKEN_ENV) or None)
        ctx.call_on_close(gate.close)
    return obj["gate"]


def open_database(ctx: click.Context, check_schema: bool = True) -> Gate:
    """The database's ``Gate``, for a command that works only there (workers, prune,
    migrations, serve, tokens): a gate URL without a database URL is refused, rather than
    the command running on the default SQLite file. SQLAlchemy and the service are
    imported here, by the commands that use them (a service command never loads them)."""
    obj = ctx.find_root().obj
    if "gate" not in obj:
        settings = database_settings(ctx)
        from gate.domain import Gate

        default_file = _default_file(settings.database_url)
        typo = misspelt_target(os.environ) if default_file is not None else None
        if typo:  # a misspelt PROMPTGATE_DATABASE_URL would silently make ./promptgate.db
            raise UsageError(typo)
        new = default_file is not None and not default_file.exists()
        gate = obj["gate"] = Gate.connect(settings=settings)
        ctx.call_on_close(gate.close)
        if new:
            gate.engine.connect().close()  # SQLite creates the file on first connection: now
        if new and default_file is not None and default_file.exists():  # new: it is not None
            click.echo(
                f"promptgate: created the SQLite database {default_file} (the default, "
                f"{DEFAULT_DATABASE_URL}; PROMPTGATE_DATABASE_URL or --database-url names another)",
                err=True,
            )
        if check_schema:
            gate.ensure_schema()
    return obj["gate"]


def _default_file(url: str) -> Path | None:
    """The file of the default SQLite database (in the current folder), when in use."""
    return Path.cwd() / DEFAULT_DATABASE_URL.removeprefix("sqlite:///") if url == DEFAULT_DATABASE_URL else None


def database_settings(ctx: click.Context) -> Settings:
    """The settings of a command that needs the database itself, or a UsageError when a
    gate URL is in force and no database URL is given."""
    obj = ctx.find_root().obj
    if "gate" in obj["given"] or (obj["gate_url"] and not obj["database_given"]):
        raise UsageError(
            f"`{ctx.command_path}` works on the gate's database, not through its service: give "
            "--database-url URL (or PROMPTGATE_DATABASE_URL)"
        )
    return obj["settings"]


def uses_service(ctx: click.Context) -> bool:
    """Whether this invocation talks to the service (``open_gate`` would give a ``RemoteGate``)."""
    obj = ctx.find_root().obj
    return is_remote(obj["gate"]) if "gate" in obj else _uses_service(obj)


def is_remote(gate) -> bool:
    """Whether ``gate`` is the service's ``RemoteGate``: one exists only once ``open_gate``
    has imported its module, so asking imports nothing (the database path never loads httpx)."""
    client = sys.modules.get(CLIENT_MODULE)
    return client is not None and isinstance(gate, client.RemoteGate)


def _uses_service(obj: dict) -> bool:
    """A URL given on the command line wins over one from the environment; both given
    there is a mistake; from the environment, the service wins over the database."""
    if {"gate", "database"} <= obj["given"]:
        raise UsageError("give --gate-url or --database-url, not both")
    if obj["given"]:
        return "gate" in obj["given"]
    return bool(obj["gate_url"])


def remember_target(
    obj: dict, gate_url: str | None = None, database_url: str | None = None, from_command_line: bool = True
) -> None:
    """Record a gate or database URL of the invocation (root option or after the subcommand)."""
    if gate_url:
        obj["gate_url"] = gate_url
    if database_url:
        obj["settings"] = obj["settings"].with_(database_url=database_url)
        obj["database_given"] = True
    if from_command_line:
        obj["given"] |= {name for name, url in (("gate", gate_url), ("database", database_url)) if url}


def database_option(f):
    """--database-url and --gate-url are accepted after the subcommand too."""

    def remember(ctx, param, value):
        if value:
            urls = {"gate_url" if param.name == "gate_url" else "database_url": value}
            remember_target(ctx.find_root().obj, **urls)
        return value

    f = click.option(
        "--gate-url",
        metavar="URL",
        expose_value=False,
        callback=remember,
        is_eager=True,
        help="Overrides PROMPTGATE_URL.",
    )(f)
    return click.option(
        "--database-url",
        metavar="URL",
        expose_value=False,
        callback=remember,
        is_eager=True,
        help="Overrides PROMPTGATE_DATABASE_URL.",
    )(f)


def print_report(report: UpdateReport, fmt: str) -> None:
    if fmt == "json":
        echo_json(report.to_dict())
    elif fmt == "markdown":
        from gate.report.markdown import render_report_markdown
        from gate.settings import public_url

        click.echo(render_report_markdown(report, context={"public_url": public_url()}))
    else:
        from gate.report.text import render_text

        click.echo(render_text(report))
