"""A file a pull request brought, read as text: bounded, named in every refusal. Apart from
the YAML reader (``yaml_file``) so that `submit` through the service, which sends the text
as it is, reads it without loading PyYAML before its submission commits."""

from __future__ import annotations

from pathlib import Path

from gate.errors import SpecError

MAX_FILE_BYTES = 256 * 1024


def read_text_file(path: str | Path, file: str, limit: int = MAX_FILE_BYTES) -> str:
    """A file's text (at most ``limit`` bytes are read), or a SpecError that names ``file``
    and says why it cannot be used."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise SpecError(file, None, "no such file") from None
    except OSError as exc:
        raise SpecError(file, None, f"cannot read the file: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise SpecError(file, None, f"the file is over the {limit // 1024} KiB limit")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(file, None, f"not UTF-8 text (byte {exc.start})") from None
