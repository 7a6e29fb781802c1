"""What every command shares: the error boundary (a GateError is one line on stderr and
its exit code; no traceback reaches a user), the gate handle of the invocation,
``--database-url`` accepted after the subcommand too, JSON output and report printing."""

from __future__ import annotations

import json

import click

from ..errors import GateError
from ..service import Gate, UpdateReport
from ..untrusted import terminal_safe


class GateGroup(click.Group):
    """Maps library errors to one line and an exit code; no tracebacks for user mistakes.
    The service API raises only GateError (a driver error arrives as a DatabaseError)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except GateError as exc:
            click.echo(f"error: {terminal_safe(exc)}", err=True)
            ctx.exit(exc.exit_code)


def echo_json(data) -> None:
    click.echo(json.dumps(data, indent=2, default=str, ensure_ascii=True))


def open_gate(ctx: click.Context, check_schema: bool = True) -> Gate:
    obj = ctx.find_root().obj
    if "gate" not in obj:
        gate = obj["gate"] = Gate.connect(settings=obj["settings"])
        ctx.call_on_close(gate.close)
        if check_schema:
            gate.ensure_schema()
    return obj["gate"]


def database_option(f):
    """--database-url is accepted after the subcommand too."""
    def remember(ctx, _param, value):
        if value:
            root = ctx.find_root()
            root.obj["settings"] = root.obj["settings"].with_(database_url=value)
        return value
    return click.option("--database-url", metavar="URL", expose_value=False, callback=remember,
                        is_eager=True, help="Overrides PROMPTGATE_DATABASE_URL.")(f)


def print_report(report: UpdateReport, fmt: str) -> None:
    if fmt == "json":
        echo_json(report.to_dict())
    elif fmt == "markdown":
        from ..markdown import render_report_markdown
        click.echo(render_report_markdown(report))
    else:
        from ..report import render_text
        click.echo(render_text(report))
