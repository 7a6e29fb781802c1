"""Commands over the gate config: `sync` (register the datasets, bars, providers, prices and limits a
gate config declares) and `prices` (its price table)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import click

from gate.untrusted import terminal_safe

from .common import database_option, echo_json, is_remote, open_gate

if TYPE_CHECKING:
    from gate.domain import Gate


@click.command("prices")
@database_option
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def prices_cmd(ctx, as_json):
    """The price table the gate config declares (USD per 1M input and output tokens), which
    a run's cost is computed with."""
    from gate.calls.prices import describe_price  # (only this command describes prices)

    prices = open_gate(ctx).prices()
    if as_json:
        echo_json([p.to_dict() for p in prices.values()])
        return
    if not prices:
        click.echo("no prices: declare them under prices: in the gate config, then `promptgate sync` it")
    for model, price in prices.items():
        click.echo(f"{terminal_safe(model)}\t{describe_price(price)}")


def check_data_files(cfg, gate_config: str) -> None:
    """Every dataset file the config declares, read as its import would read it: one that
    would not import fails here, naming its file, line and gate config key, before anything
    is changed or uploaded (a dry run included)."""
    from gate.datasets.sources.upload import local_repo_path
    from gate.errors import DatasetError
    from gate.gateconfig.datafiles import check_dataset_files

    problems = check_dataset_files(cfg, local_repo_path(gate_config))
    if problems:
        head = "" if len(problems) == 1 else f"{len(problems)} dataset files would not import: "
        raise DatasetError(head + "; ".join(str(p) for p in problems))


@click.command("sync")
@database_option
@click.argument("gate_config", metavar="GATE_CONFIG", type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="Only show what would change.")
@click.option(
    "--commit",
    envvar="GITHUB_SHA",
    default=None,
    help="The commit GATE_CONFIG was read at (full id; default $GITHUB_SHA): recorded with each break it "
    "newly accepts (accept_breaks).",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def sync_cmd(ctx, gate_config, dry_run, commit, as_json):
    """Make the gate's datasets and bars match GATE_CONFIG (idempotent). Mappings a gate
    config declared that the file no longer declares are removed; mappings added with
    `dataset map` are kept apart and left alone (remove them with `dataset unmap`)."""
    from gate import gateconfig

    check_data_files(gateconfig.load_config(gate_config), gate_config)
    gate = open_gate(ctx)
    if is_remote(gate):  # file datasets' rows uploaded from here, the rest read by the service
        from gate.datasets.sources.upload import local_repo_path
        from gate.gateconfig.remote import sync_remote
        from gate.prompt.text_file import read_text_file

        cfg = gateconfig.load_config(gate_config)
        result = sync_remote(
            gate,
            cfg,
            read_text_file(gate_config, cfg.path),
            dry_run=dry_run,
            config_path=local_repo_path(gate_config),
            commit=commit,
        )
    else:
        cfg = gateconfig.load_config(gate_config)
        local = cast("Gate", gate)  # not remote: the database's Gate
        result = gateconfig.diff(local, cfg) if dry_run else gateconfig.sync(local, cfg, commit=commit)
    if as_json:
        echo_json(
            {
                "path": result.path,
                "applied": result.applied,
                "changes": [
                    {"kind": c.kind, "subject": c.subject, "before": c.before, "after": c.after, "text": str(c)}
                    for c in result.changes
                ],
            }
        )
        return
    if not result.changes:
        click.echo(f"{gate_config}: the gate already matches")
    for line in result.lines():  # a warning is said as it is: nothing would change
        click.echo(("would: " if dry_run and not line.startswith("warning:") else "") + terminal_safe(line, 1000))
