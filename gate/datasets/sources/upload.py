"""Rows a client uploaded: a CSV or JSONL file's bytes sent to the service (``PUT
/v1/datasets/{name}/rows``), spooled by the route, read here by the same decoding as a
local file (``files.TextDecoder``, ``read_text_page``: the row size limit, the header
checks, the formats).

``UploadReader`` reads an open binary stream the request handed it; it takes no path and
no URI, so nothing the caller sends can point it at a file of the server's. A dataset
registered from an upload has the source ``upload://<its path in the repository>``; that
URI opens no reader: its rows exist only when a client sends them again, so a refresh
without them says so in one line.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from gate.errors import DatasetError, UsageError
from gate.untrusted import CONTROL, LINE_BREAKS

from .base import Page, SourceOptions, register
from .files import LineStream, TextDecoder, parse_cursor, read_text_page, text_kind

UPLOAD_SCHEME = "upload"
MAX_REPO_PATH = 500
REPO_PATH_RE = re.compile(r"[^\x00-\x1f\x7f\\]+")


def upload_uri(repo_path: str) -> str:
    return f"{UPLOAD_SCHEME}://{repo_path}"


def check_repo_path(path: str | None) -> str:
    """A file's path in the repository as an upload names it: relative, "/"-separated,
    normalised, inside the repository (no "..", no leading "/"), printable: no control,
    line-break or bidi-override character (the path is echoed in the source, the plan and
    the report, where U+202E would show one name as another)."""
    if not isinstance(path, str) or not path.strip():
        raise UsageError("give the uploaded file's path in the repository (path)")
    path = path.strip()
    normal = posixpath.normpath(path)
    if (
        len(path) > MAX_REPO_PATH
        or not REPO_PATH_RE.fullmatch(path)
        or CONTROL.search(path)
        or LINE_BREAKS.search(path)
        or normal != path
        or path.startswith("/")
        or normal == ".."
        or normal.startswith("../")
    ):
        raise UsageError(
            f"{path[:80]!r} is not a file's path in the repository (relative, with /, no .., at most "
            f"{MAX_REPO_PATH} characters)"
        )
    return path


def repo_path_of(config_path: str, source: str) -> str:
    """The repository path of a file dataset's ``source`` (as written in the gate config,
    relative to the config's folder), given the config's own repository path."""
    folder = posixpath.dirname(config_path.replace("\\", "/"))
    joined = posixpath.normpath(posixpath.join(folder, source.removeprefix("file://")))
    if source.startswith(("/", "file:///")) or joined == ".." or joined.startswith("../"):
        raise UsageError(
            f"{config_path}: dataset source {source[:120]!r} is outside the gate config's folder: a "
            "file sent to the service must be in the repository, beside or below its gate config"
        )
    return check_repo_path(joined)


def local_repo_path(path: str | Path) -> str:
    """The path a file given on the command line is recorded under: as given, relative to
    the current folder when it is below it, else its name."""
    full = Path(path).absolute()
    try:
        return check_repo_path(full.relative_to(Path.cwd()).as_posix())
    except (ValueError, UsageError):
        return check_repo_path(full.name)


def upload_format(path: str | Path) -> str:
    """csv or jsonl by the file's suffix (the service is told, as its name may have none)."""
    return text_kind(Path(path).name, str(path))


@contextmanager
def open_upload(path: str | Path) -> Iterator[tuple[BinaryIO, int]]:
    """A local dataset file opened for upload, with its size: a regular file only."""
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read the dataset: {exc.strerror or exc}") from None
    with fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise DatasetError(f"{path}: not a regular file")
        yield fh, info.st_size


class UploadReader:
    """A reader over an uploaded file's bytes (a seekable binary stream of the request)."""

    def __init__(self, stream: BinaryIO, name: str, options: SourceOptions, kind: str | None = None):
        self.stream, self.uri, self.options = stream, name, options
        self.kind = text_kind(name, name, kind)
        self.decoder = TextDecoder(name, self.kind, options)
        self._snapshot: str | None = None

    def snapshot_version(self) -> str:
        if self._snapshot is None:
            digest = hashlib.sha256()
            self.stream.seek(0)
            for block in iter(lambda: self.stream.read(1 << 20), b""):
                digest.update(block)
            self._snapshot = f"sha256:{digest.hexdigest()}"
        return self._snapshot

    def close(self) -> None:
        pass

    def read_page(self, cursor: str | None, limit: int) -> Page:
        if self.decoder.needs_header:
            self.stream.seek(0)
            self.decoder.read_header(LineStream(self.stream))
        offset, line_no = parse_cursor(cursor, self.decoder.data_start, self.decoder.first_line)
        self.stream.seek(offset)
        return read_text_page(LineStream(self.stream, offset, line_no), self.decoder, limit)


@register(UPLOAD_SCHEME)
def _no_reader(uri: str, _options: SourceOptions):
    """An uploaded dataset's source opens nothing: its rows come with the next upload."""
    raise DatasetError(
        f"{uri}: this dataset's rows were uploaded: refresh it by uploading the file again "
        "(`promptgate dataset refresh NAME --file PATH`, or `promptgate sync` of its gate config)"
    )
