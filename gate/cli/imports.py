"""`promptgate import promptfoo|openai-evals FILE --to DIR`: another tool's eval files as the
gate's prompt files, datasets and gate config entries (``gate.imports``); what was not
imported is listed, one line each, and kept in DIR/IMPORT.txt."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # the command's help loads no YAML (tests/unit/test_cli_imports.py)
    from gate.imports.bundle import Imported

TO_HELP = "The folder to write into (prompts/, judges/, datasets/, gate.yaml, IMPORT.txt); not one with a gate.yaml."


@click.group("import")
def import_group():
    """Import prompts, datasets and checks from promptfoo or OpenAI eval files."""


@import_group.command("promptfoo")
@click.argument("config", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--to", "to", required=True, type=click.Path(file_okay=False, path_type=Path), help=TO_HELP)
def promptfoo_cmd(config: Path, to: Path):
    """A promptfooconfig.yaml: its prompts, its tests (as datasets) and the asserts that map
    as checks; llm-rubric as a judge skeleton; everything else listed."""
    from gate.imports.promptfoo import import_promptfoo

    _written(import_promptfoo(config), to)


@import_group.command("openai-evals")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--data", type=click.Path(dir_okay=False, path_type=Path), help='An eval export\'s {"item": ...} JSONL.')
@click.option("--model", default="gpt-4o-mini", show_default=True, help="The model when the file names none.")
@click.option("--to", "to", required=True, type=click.Path(file_okay=False, path_type=Path), help=TO_HELP)
def openai_evals_cmd(file: Path, data: Path | None, model: str, to: Path):
    """An exported hosted eval (JSON, with --data) or the openai/evals registry's samples
    (JSONL with input and ideal): a dataset and a prompt; string_check graders as checks,
    label_model as a judge skeleton, the others listed."""
    from gate.imports.openai_evals import import_openai_evals

    _written(import_openai_evals(file, data, model), to)


def _written(bundle: Imported, to: Path) -> None:
    paths = bundle.write(to)
    for line in bundle.lines():
        click.echo(line)
    click.echo(f"wrote {len(paths)} files into {to}")
