"""What production serves and whether the repository says the same: ``drift`` (the prompt
files against live, ``gate.contract.drift``), and the lines `live` prints of the fleet and of a
canary rollout in progress (``served_lines``, ``rollout_line``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from gate.errors import GateError
from gate.untrusted import terminal_safe

from .common import database_option, echo_json, open_gate

if TYPE_CHECKING:
    from gate.prompt.spec import PromptSpec

DEFAULT_PROMPTS = "prompts/**/*.yaml"
MAX_FILES = 5000


def served_lines(served: dict) -> list[str]:
    """The versions served and by how many processes, then each stale process."""
    uncounted = served.get("uncounted") or 0
    aside = (
        [f"  {uncounted} more reported by tokens that may not run this prompt (read tokens): not counted"]
        if uncounted
        else []
    )
    if not served["active"]:
        return ["served: no runtime process that may run this prompt has reported in the last interval", *aside]
    lines = [f"served by {served['active']} process{'es' if served['active'] != 1 else ''}:"]
    for group in served["versions"]:
        beside = f" (canary, stable v{group['stable_version']} beside it)" if group["stable_version"] else ""
        stale = f", {group['stale']} stale" if group["stale"] else ""
        lines.append(f"  v{group['version']}{beside}: {group['processes']}{stale}")
    for p in served["processes"]:
        if p.stale:
            lines.append(
                f"  stale: pid {p.pid} reported by {p.reported_by} serves v{p.version}, last seen "
                f"{p.seen_seconds_ago:.0f} s ago"
            )
    return lines + aside


def rollout_line(rollout: dict | None) -> str | None:
    if rollout is None:
        return None
    figures = rollout.get("figures") or {}
    lo, hi = figures.get("interval") or (None, None)
    interval = "" if lo is None else f", interval [{lo * 100:+.1f}, {cast(float, hi) * 100:+.1f}] points"  # a pair
    c, s = figures.get("canary") or {}, figures.get("stable") or {}
    counts = f": canary {c.get('correct', 0)}/{c.get('n', 0)}, stable {s.get('correct', 0)}/{s.get('n', 0)}"
    return (
        f"rollout {rollout['id']} {rollout['status']}: canary v{rollout['canary_version']} at "
        f"{format(float(rollout['config'].get('canary_percent', 10)), 'g')} % beside stable "
        f"v{rollout['stable_version']}{counts if figures else ''}{interval}"
    )


def files_or_default(paths: tuple[str, ...]) -> list[str]:
    """The files given, or every file the Action's default globs match under the current
    folder (at most ``MAX_FILES``)."""
    if paths:
        return list(paths)
    return sorted(str(p) for p in Path(".").glob(DEFAULT_PROMPTS) if p.is_file())[:MAX_FILES]


def read_prompts(paths: list[str]) -> list[tuple[str, PromptSpec | GateError]]:
    """(path, PromptSpec or the GateError reading it) for each file."""
    from gate.prompt.spec import parse_spec_text
    from gate.prompt.text_file import read_text_file

    found: list[tuple[str, PromptSpec | GateError]] = []
    for path in paths:
        try:
            found.append((path, parse_spec_text(read_text_file(path, path), file=path)))
        except GateError as exc:
            found.append((path, exc))
    return found


def declared_prompts(config_path: str | None) -> set[str] | None:
    if not config_path:
        return None
    from gate.gateconfig.parse import load_config

    cfg = load_config(config_path)
    return set(cfg.prompts) | set(cfg.rollouts) | set(cfg.optional_fields)


@click.command()
@database_option
@click.argument("prompt_files", nargs=-1, type=click.Path(dir_okay=False))
@click.option(
    "--gate-config",
    "gate_config",
    default=None,
    type=click.Path(dir_okay=False),
    help="Only the prompts this gate config declares count as live only (with PROMPT_FILES given: "
    "without it, no prompt does).",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def drift(ctx, prompt_files, gate_config, as_json):
    """Compare prompt files (default: prompts/**/*.yaml) with what is live: in-step, differs
    (the live version, what made it, a diff), live-only, file-only, pending (an apply of the
    file's config still open), invalid. Files named one by one are compared alone (the live
    prompts no file defines are listed only for the default files, or with --gate-config).
    Exit 0 when all are in step, 1 otherwise."""
    from gate.contract.drift import compare, exit_code, text_lines

    declared = declared_prompts(gate_config)
    live_only = not prompt_files or declared is not None
    entries = compare(open_gate(ctx), read_prompts(files_or_default(prompt_files)), declared, live_only)
    if as_json:
        echo_json([e.to_dict() for e in entries])
    else:
        for line in text_lines(entries):
            click.echo(terminal_safe(line, 2000))
    ctx.exit(exit_code(entries))
