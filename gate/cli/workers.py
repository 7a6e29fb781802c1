"""Commands over the worker processes: running them, and the list of live ones."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import click

from gate.calls.providers import endpoint_warning

from .common import database_option, database_settings, echo_json, open_gate


@click.command()
@database_option
@click.option(
    "--role",
    default="all",
    show_default=True,
    envvar="PROMPTGATE_ROLE",
    help="all, or a comma list of materialize, execute, finalize, reconcile, rollout "
    "(rollout: decides canary rollouts from production's feedback).",
)
@click.option("--processes", type=int, default=1, show_default=True, envvar="PROMPTGATE_PROCESSES")
@click.option(
    "--concurrency",
    type=int,
    default=None,
    envvar="PROMPTGATE_CONCURRENCY",
    help="Model calls in flight per process (default 8).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    default=None,
    envvar="PROMPTGATE_METRICS_PORT",
    help="Serve this host's model-call metrics for Prometheus on this port (default: off).",
)
@click.option(
    "--metrics-host",
    default="0.0.0.0",
    show_default=True,
    envvar="PROMPTGATE_METRICS_HOST",
    help="Address the metrics port listens on.",
)
@click.pass_context
def worker(ctx, role, processes, concurrency, metrics_port, metrics_host):
    """Run workers until SIGTERM/SIGINT (then drain)."""
    from workers.supervisor import parse_roles, supervise, worker_settings

    settings = database_settings(ctx)
    if processes < 1 or (concurrency is not None and concurrency < 1):
        raise click.BadParameter("--processes and --concurrency must be at least 1")
    roles = parse_roles(role)
    warning = endpoint_warning() if "execute" in roles else None
    if warning:
        click.echo(warning, err=True)
    exposed: AbstractContextManager[None] = nullcontext()
    if metrics_port is not None:  # imported only then: prometheus_client is ~50 ms of a quick role's start
        from workers.execute.metrics import serving

        exposed = serving(metrics_port, metrics_host, processes)
    with exposed:
        supervise(worker_settings(settings, concurrency), roles, processes)


@click.command("workers")
@database_option
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def workers_cmd(ctx, as_json):
    """List live worker processes."""
    rows = open_gate(ctx).live_workers()
    if as_json:
        echo_json([vars(r) for r in rows])
        return
    if not rows:
        click.echo("no live workers")
    for r in rows:
        calls = "no call in flight" if r.oldest_call_seconds is None else f"oldest call {r.oldest_call_seconds:.1f}s"
        click.echo(
            f"{r.id}\t{r.role}\t{r.host}\tpid {r.pid}\tup since {r.started_at:%H:%M:%S}\t"
            f"beat {r.heartbeat_at:%H:%M:%S}\t{calls}"
        )
