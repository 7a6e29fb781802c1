"""The `promptgate` command: parse, call the library, print (text or --json).

Every GateError becomes one line on stderr and exit code 2 (usage errors included);
`wait` and `status` exit 0 APPLIED/PASSED, 1 REJECTED, 2 FAILED/CANCELLED, 3 still open.
"""

from __future__ import annotations

import json
import logging
import sys

import click
from sqlalchemy.exc import DBAPIError

from . import __version__
from .errors import GateError
from .service import Gate, UpdateReport
from .settings import Settings
from .spec import load_spec
from .untrusted import terminal_safe


class GateGroup(click.Group):
    """Maps library errors to one line and an exit code; no tracebacks for user mistakes."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except GateError as exc:
            click.echo(f"error: {terminal_safe(exc)}", err=True)
            ctx.exit(exc.exit_code)
        except DBAPIError as exc:
            click.echo(f"error: database: {terminal_safe(str(exc.orig or exc).splitlines()[0])}", err=True)
            ctx.exit(2)


def echo_json(data) -> None:
    click.echo(json.dumps(data, indent=2, default=str, ensure_ascii=False))


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


@click.group(cls=GateGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--database-url", envvar="PROMPTGATE_DATABASE_URL", metavar="URL",
              help="sqlite:///promptgate.db (default) or mysql://user:pass@host/db")
@click.option("-v", "--verbose", is_flag=True, help="Log what the workers do.")
@click.version_option(__version__, prog_name="promptgate")
@click.pass_context
def cli(ctx, database_url, verbose):
    """prompt-gate: prompt changes go live only when they clear every accuracy bar."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ctx.obj = {"settings": Settings.from_env(database_url=database_url)}


# --- database ------------------------------------------------------------------------

@cli.group()
def db():
    """Schema migrations."""


@db.command("upgrade")
@database_option
@click.pass_context
def db_upgrade(ctx):
    """Apply pending migrations (idempotent; safe to run concurrently)."""
    applied = open_gate(ctx, check_schema=False).upgrade()
    click.echo(f"applied migrations: {', '.join(map(str, applied))}" if applied else "schema is up to date")


# --- datasets -----------------------------------------------------------------------------

@cli.group()
def dataset():
    """Register datasets and map them to prompts with accuracy bars."""


@dataset.command("add")
@database_option
@click.argument("name")
@click.option("--source", "source_uri", required=True, metavar="URI",
              help="path or file:// (CSV/JSONL), https://, s3://bucket/key, sql+URL?query=...")
@click.option("--id-column", default=None, help="Column holding the item id (default item_id).")
@click.option("--label-column", default=None, help="Column holding the expected label (default expected_decision).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def dataset_add(ctx, name, source_uri, id_column, label_column, as_json):
    """Register dataset NAME (or point it at a new source)."""
    ds = open_gate(ctx).register_dataset(name, source_uri, id_column=id_column, label_column=label_column)
    if as_json:
        echo_json({"id": ds.id, "name": ds.name, "source_uri": ds.source_uri, "options": ds.options})
    else:
        click.echo(f"dataset {ds.name}: {ds.source_uri}")


@dataset.command("map")
@database_option
@click.argument("prompt")
@click.argument("dataset_name", metavar="DATASET")
@click.option("--min-accuracy", required=True, help="The bar, a fraction in [0, 1] (0.95 = 95%).")
@click.pass_context
def dataset_map(ctx, prompt, dataset_name, min_accuracy):
    """Gate PROMPT on DATASET with a bar."""
    m = open_gate(ctx).map_dataset(prompt, dataset_name, min_accuracy)
    click.echo(f"{m.prompt_name} × {m.dataset_name}: min accuracy {m.min_accuracy}")


@dataset.command("unmap")
@database_option
@click.argument("prompt")
@click.argument("dataset_name", metavar="DATASET")
@click.pass_context
def dataset_unmap(ctx, prompt, dataset_name):
    """Remove the gate of PROMPT on DATASET."""
    removed = open_gate(ctx).unmap_dataset(prompt, dataset_name)
    click.echo(f"{prompt} × {dataset_name}: {'unmapped' if removed else 'was not mapped'}")


@dataset.command("list")
@database_option
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def dataset_list(ctx, as_json):
    """Datasets and the prompts gated on them."""
    rows = open_gate(ctx).list_datasets()
    if as_json:
        echo_json([{"name": ds.name, "source_uri": ds.source_uri, "options": ds.options,
                    "gates": [{"prompt": m.prompt_name, "min_accuracy": str(m.min_accuracy)} for m in maps]}
                   for ds, maps in rows])
        return
    if not rows:
        click.echo("no datasets: add one with `promptgate dataset add NAME --source URI`")
    for ds, maps in rows:
        gates = ", ".join(f"{m.prompt_name} ≥ {m.min_accuracy}" for m in maps) or "not mapped"
        click.echo(f"{ds.name}\t{terminal_safe(ds.source_uri)}\t{gates}")


@dataset.command("preview")
@database_option
@click.argument("name")
@click.option("--rows", type=int, default=10, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def dataset_preview(ctx, name, rows, as_json):
    """The first rows, the row count and the label distribution of dataset NAME."""
    p = open_gate(ctx).preview_dataset(name, rows)
    if as_json:
        echo_json({"row_count": p.row_count, "labels": p.label_counts, "snapshot": p.snapshot_version,
                   "rows": [{"item_id": r.item_id, "expected_decision": r.expected, "input": r.input}
                            for r in p.first_rows]})
        return
    click.echo(f"{name}: {p.row_count} rows, labels " +
               ", ".join(f"{terminal_safe(label, 40)} {n}" for label, n in p.label_counts.items()) +
               (f" ({terminal_safe(p.snapshot_version)})" if p.snapshot_version else ""))
    for r in p.first_rows:
        fields = terminal_safe(json.dumps(r.input, ensure_ascii=False), 120)
        click.echo(f"  {terminal_safe(r.item_id)}\t{terminal_safe(r.expected)}\t{fields}")


# --- submissions ---------------------------------------------------------------------------------

@cli.command()
@database_option
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--mode", type=click.Choice(["check", "apply"]), default="check", show_default=True,
              help="check: evaluate only; apply: go live when every bar clears.")
@click.option("--source-key", default=None, help="Submissions with the same key replace each other (check mode).")
@click.option("--sha", default=None, help="The commit this candidate comes from (for `wait --sha`).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def submit(ctx, file, mode, source_key, sha, as_json):
    """Stage the prompt in FILE for evaluation; prints the tracking id."""
    spec = load_spec(file)
    source = {"path": file, **({"key": source_key} if source_key else {}), **({"sha": sha} if sha else {})}
    update_id = open_gate(ctx).submit(spec, mode=mode, source=source)
    if as_json:
        echo_json({"id": update_id, "prompt": spec.name, "mode": mode})
    else:
        click.echo(update_id)


@cli.command()
@database_option
@click.argument("update_id", type=int)
@click.option("--json", "as_json", is_flag=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default=None,
              help="text (default), json (same as --json) or markdown (the pull-request report).")
@click.pass_context
def status(ctx, update_id, as_json, fmt):
    """Where update UPDATE_ID stands (exit 0 cleared, 1 rejected, 2 failed/cancelled, 3 open)."""
    report = open_gate(ctx).status(update_id)
    print_report(report, "json" if as_json else (fmt or "text"))
    ctx.exit(report.exit_code)


@cli.command()
@database_option
@click.argument("update_id", type=int, required=False)
@click.option("--sha", default=None, help="Wait for every update submitted for this commit instead.")
@click.option("--prompt", "prompt_name", default=None, help="With --sha: only this prompt's updates.")
@click.option("--timeout", type=float, default=None, help="Seconds to wait (default: until terminal).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def wait(ctx, update_id, sha, prompt_name, timeout, as_json):
    """Wait for update UPDATE_ID (or the updates of --sha) to end: exit 0 cleared, 1 rejected,
    2 failed/cancelled, 3 timeout."""
    if (update_id is None) == (sha is None):
        raise click.UsageError("give an UPDATE_ID or --sha SHA (not both)")
    if sha is None:
        report = open_gate(ctx).wait(update_id, timeout=timeout)
        print_report(report, "json" if as_json else "text")
        ctx.exit(report.exit_code)
    from .action import wait_for_sha
    code, reports = wait_for_sha(open_gate(ctx), sha, prompt_name, timeout)
    if as_json:
        echo_json([r.to_dict() for r in reports])
    else:
        for report in reports:
            print_report(report, "text")
    ctx.exit(code)


@cli.command()
@database_option
@click.argument("update_id", type=int)
@click.pass_context
def cancel(ctx, update_id):
    """Cancel an open update; its results can never apply."""
    open_gate(ctx).cancel(update_id)
    click.echo(f"update {update_id}: CANCELLED")


@cli.command()
@database_option
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def live(ctx, name, as_json):
    """The live config of prompt NAME and its version."""
    p = open_gate(ctx).live(name)
    if as_json:
        echo_json({"name": p.name, "version": p.version, "config_hash": p.config_hash,
                   "applied_update_id": p.applied_update_id, "updated_at": p.updated_at, "config": p.config})
    else:
        click.echo(f"{p.name} v{p.version} (update {p.applied_update_id}, {p.updated_at:%Y-%m-%d %H:%M:%S} UTC, "
                   f"{p.config_hash[:12]})")
        click.echo(json.dumps(p.config, indent=2, ensure_ascii=False))


def print_report(report: UpdateReport, fmt: str) -> None:
    if fmt == "json":
        echo_json(report.to_dict())
    elif fmt == "markdown":
        from .markdown import render_report_markdown
        click.echo(render_report_markdown(report))
    else:
        from .report import render_text
        click.echo(render_text(report))


# --- workers ---------------------------------------------------------------------------------------

@cli.command()
@database_option
@click.option("--role", default="all", show_default=True, envvar="PROMPTGATE_ROLE",
              help="all, or a comma list of materialize, execute, finalize, reconcile.")
@click.option("--processes", type=int, default=1, show_default=True, envvar="PROMPTGATE_PROCESSES")
@click.option("--concurrency", type=int, default=None, envvar="PROMPTGATE_CONCURRENCY",
              help="Model calls in flight per process (default 8).")
@click.pass_context
def worker(ctx, role, processes, concurrency):
    """Run workers until SIGTERM/SIGINT (then drain)."""
    from workers.supervisor import parse_roles, supervise
    settings = ctx.obj["settings"]
    if processes < 1 or (concurrency is not None and concurrency < 1):
        raise click.BadParameter("--processes and --concurrency must be at least 1")
    roles = parse_roles(role)
    supervise(settings.with_(concurrency=concurrency), roles, processes, concurrency)


@cli.command("workers")
@database_option
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def workers_cmd(ctx, as_json):
    """List live worker processes."""
    from . import store
    gate = open_gate(ctx)
    with gate.engine.connect() as conn:
        rows = store.live_workers(conn, gate.settings.heartbeat_seconds * 3)
    if as_json:
        echo_json([vars(r) for r in rows])
        return
    if not rows:
        click.echo("no live workers")
    for r in rows:
        click.echo(f"{r.id}\t{r.role}\t{r.host}\tpid {r.pid}\tup since {r.started_at:%H:%M:%S}\t"
                   f"beat {r.heartbeat_at:%H:%M:%S}")


@cli.command("mock-llm")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8000, show_default=True)
@click.option("--latency-ms", type=float, default=0.0, help="Fixed latency per request.")
@click.option("--jitter-ms", type=float, default=0.0, help="Uniform extra latency.")
@click.option("--error-rate", type=float, default=0.0, help="Fraction answered 500.")
@click.option("--rate-limit-rpm", type=int, default=0, help="Requests per minute before 429 + Retry-After.")
@click.option("--timeout-rate", type=float, default=0.0, help="Fraction that hang past the client timeout.")
@click.option("--garbage-rate", type=float, default=0.0, help="Fraction answered outside the labels.")
@click.option("--hang-seconds", type=float, default=60.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--api-key", default=None, help="Require this bearer token.")
def mock_llm(**options):
    """Run the local OpenAI-compatible model server (a stand-in for tests and demos)."""
    from .mockllm import serve_forever
    host, port = options.pop("host"), options.pop("port")
    serve_forever(host, port, **options)


@cli.command()
@click.option("--database-url", "demo_db", default=None, metavar="URL",
              help="Run against this database instead of a temporary SQLite file.")
@click.option("--examples", type=click.Path(file_okay=False, exists=True), default=None,
              help="The example folder (default: ./prompts-example, else the packaged copy).")
@click.option("--format", "fmt", type=click.Choice(["markdown", "text"]), default="markdown", show_default=True)
def demo(demo_db, examples, fmt):
    """Show the gate end to end in under 30 s: one change REJECTED, one APPLIED."""
    from .demo import run_demo
    ok = run_demo(database_url=demo_db, examples=examples, fmt=fmt, echo=click.echo)
    sys.exit(0 if ok else 1)


def main(argv=None) -> None:
    cli.main(args=argv, prog_name="promptgate")


from . import cli_action  # noqa: E402,F401  (registers sync, action, report)

if __name__ == "__main__":
    # `python -m gate.cli` runs this file as __main__, a second copy of the module:
    # call the package's own group so the commands registered on it are there.
    from gate.cli import main as _main
    _main()
