"""Every dataset file a gate config declares, read as its import would read it (issue 35.4):
a pull request's dry run and `sync --dry-run` fail on a file the import would refuse — a
wrong header, a row over the size limit, a duplicate id — naming the file, the line and the
gate config key to change, instead of passing and then blocking every push to the default
branch. The rows are read by the service's own reader of an uploaded file
(``UploadReader``) and checked by the importer's own rules (``gate.datasets.rows``); nothing
is stored and nothing is sent."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gate.datasets.rows import check_rows
from gate.datasets.sources import SourceOptions, scheme_of
from gate.datasets.sources.upload import UploadReader, open_upload, repo_path_of
from gate.errors import DatasetError, GateError, UsageError
from gate.settings import Settings

from .parse import DatasetDecl, GateConfig

LINE = re.compile(r"\bline (\d+)\b")
COLUMN = re.compile(r"no (id|label) column ")


@dataclass(frozen=True)
class DataFileProblem:
    """A dataset file its import would refuse: where, and the gate config key that names it."""

    dataset: str
    file: str  # its path in the repository (or as the config names it)
    line: int | None
    key: str  # the gate config key to look at: datasets.NAME[.label_column|.id_column]
    reason: str

    def __str__(self) -> str:
        return f"{self.reason} (gate config key {self.key})"


def check_dataset_files(cfg: GateConfig, config_path: str | None = None, settings: Settings | None = None) -> list:
    """The problems of the config's file datasets (none: each would import). ``config_path``:
    the config's path in the repository, so files are named as the repository names them."""
    settings = settings or Settings.from_env()
    problems = []
    for name, decl in sorted(cfg.datasets.items()):
        if scheme_of(decl.source) != "file":
            continue
        shown = _shown_path(decl, config_path or cfg.path)
        try:
            _check_file(decl, shown, settings)
        except DatasetError as exc:
            problems.append(_problem(name, shown, str(exc)))
    return problems


def _shown_path(decl: DatasetDecl, config_path: str) -> str:
    try:
        return repo_path_of(config_path, decl.source)
    except UsageError:
        return decl.source


def _check_file(decl: DatasetDecl, shown: str, settings: Settings) -> None:
    options = SourceOptions(
        id_column=decl.id_column, label_column=decl.label_column, max_row_bytes=settings.max_row_bytes
    )
    with open_upload(decl.source_uri) as (stream, _size):
        reader = UploadReader(stream, shown, options)
        try:
            check_rows(
                decl.name,
                reader,
                settings.page_size,
                settings.page_bytes,
                settings.max_row_bytes,
                settings.max_version_bytes,
            )
        except GateError as exc:
            raise DatasetError(str(exc)) from None


def _problem(name: str, shown: str, reason: str) -> DataFileProblem:
    line = LINE.search(reason)
    column = COLUMN.search(reason)
    key = f"datasets.{name}" + (f".{column.group(1)}_column" if column else "")
    return DataFileProblem(name, shown, int(line.group(1)) if line else None, key, reason)
