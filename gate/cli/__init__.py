"""The `promptgate` command: parse, call the domain API, print (text or --json).

Every GateError becomes one line on stderr and exit code 2 (usage errors included);
`wait` and `status` exit 0 APPLIED/PASSED, 1 REJECTED, 2 FAILED/CANCELLED, 3 still open.

The root group is built here from the commands of each module (``datasets``, ``updates``,
``workers``, ``retention``, ``service``, ``action_command``, and ``mock-llm`` from ``gate.mockllm``); those modules
import only ``common``, never this one, so nothing imports in a circle.
`python -m gate`, `python -m gate.cli` and the console script `promptgate` all run ``main``.
"""

from __future__ import annotations

import gc
import logging
import threading

import click
from click.core import ParameterSource

from gate import __version__
from gate.mockllm import command as mock_llm
from gate.settings import Settings

from .action_command import action_cmd
from .common import TARGET_HELP, GateGroup, remember_target
from .database import db
from .datasets import dataset
from .demo import demo
from .gate_config import prices_cmd, sync_cmd
from .history import history, rollback
from .imports import import_group
from .production import drift
from .retention import prune
from .service import serve, token
from .updates import cancel, live, report_cmd, status, submit, wait
from .workers import worker, workers_cmd


@click.group(cls=GateGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--database-url",
    envvar="PROMPTGATE_DATABASE_URL",
    metavar="URL",
    help="sqlite:///promptgate.db (default) or mysql://user:pass@host/db",
)
@click.option("--gate-url", envvar="PROMPTGATE_URL", metavar="URL", help=TARGET_HELP)
@click.option("-v", "--verbose", is_flag=True, help="Log what the workers do.")
@click.version_option(__version__, prog_name="promptgate")
@click.pass_context
def cli(ctx, database_url, gate_url, verbose):
    """prompt-gate: prompt changes go live only when they clear every accuracy bar."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    ctx.obj = {"settings": Settings.from_env(), "gate_url": None, "given": set(), "database_given": False}
    for option, url in (("database_url", database_url), ("gate_url", gate_url)):
        remember_target(
            ctx.obj, **{option: url}, from_command_line=ctx.get_parameter_source(option) == ParameterSource.COMMANDLINE
        )


for _command in (
    db,
    dataset,
    prices_cmd,
    sync_cmd,
    submit,
    status,
    wait,
    cancel,
    live,
    report_cmd,
    worker,
    workers_cmd,
    mock_llm,
    demo,
    action_cmd,
    prune,
    serve,
    token,
    history,
    rollback,
    drift,
    import_group,
):
    cli.add_command(_command)


# A command imports ~500 modules as it starts, and none of what they allocate is garbage; the
# cycle collector still walks it, ~125 times (one full pass) in a `status`: 50-60 ms of its
# 0.45 s, measured with gc.callbacks. Off for a command's first seconds, a short command ends
# without a pass; a long one (worker, serve, wait) has the collector back after them.
COLLECTOR_OFF_AT_START = 2.0


def collector_off_while_starting(seconds: float = COLLECTOR_OFF_AT_START) -> None:
    """Turn the cycle collector off now and back on after ``seconds`` (a daemon timer, so a
    command that ends sooner is not held up); nothing if something else turned it off."""
    if not gc.isenabled():
        return
    gc.disable()
    timer = threading.Timer(seconds, gc.enable)
    timer.daemon = True
    timer.start()


def main(argv=None) -> None:
    """The command, then its objects frozen: the interpreter's end collects what it tears
    down, ~0.15 s after a `status` or a `wait` had printed (0.12-0.22 s, 0.01-0.02 s frozen;
    measured from the last line to the exit). Files, connections and atexit handlers are
    closed as before; the process then ends without walking its heap. Not for a process
    that goes on after it (its garbage from then on would never be collected)."""
    collector_off_while_starting()
    try:
        cli.main(args=argv, prog_name="promptgate")
    finally:
        gc.freeze()


__all__ = ["cli", "main"]
