"""What an import makes (``Imported``): prompt files, judge skeletons, datasets, the gate
config's entries and what was not imported (``Skipped``), checked by the gate's own parsers
before a file is written, and written into one folder::

    DIR/gate.yaml                 the datasets and each prompt's mapping
    DIR/prompts/NAME.yaml         one prompt file per imported prompt
    DIR/judges/NAME.yaml          judge skeletons (kind: judge): they need human labels first
    DIR/datasets/NAME.jsonl       one row per test (item_id, expected_decision, the columns)
    DIR/IMPORT.txt                what was imported, and everything that was not, and why
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gate.errors import UsageError

MAX_SOURCE_BYTES = 16 * 1024 * 1024  # an eval file read whole: bounded
NAME_CHARS = re.compile(r"[^a-z0-9._-]+")


@dataclass(frozen=True)
class Skipped:
    """One thing not imported: where it was in the source, what it was, why."""

    where: str
    what: str
    why: str

    def line(self) -> str:
        return f"{self.where}: {self.what}: {self.why}"


@dataclass
class Imported:
    source: str  # what was read, as the listing names it
    prompts: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> prompt file
    judges: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> judge skeleton
    datasets: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # name -> rows
    mappings: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # prompt -> gate.yaml entries
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def skip(self, where: str, what: str, why: str) -> None:
        self.skipped.append(Skipped(where, what, why))

    def config(self) -> dict[str, Any]:
        """The gate config's entries: every dataset, every prompt's mappings."""
        return {
            "datasets": {name: {"source": f"datasets/{name}.jsonl"} for name in self.datasets},
            "prompts": {name: entries for name, entries in self.mappings.items()},
        }

    def check(self, to: Path) -> None:
        """Every prompt file and judge parsed by the gate's parser, the gate config by its own
        (a problem is a UsageError naming the file): what is written is what the gate reads."""
        from gate.gateconfig.parse import parse_config
        from gate.prompt.spec import parse_spec

        for folder, files in (("prompts", self.prompts), ("judges", self.judges)):
            for name, data in files.items():
                parse_spec(data, f"{folder}/{name}.yaml")
        if self.mappings:
            parse_config(self.config(), "gate.yaml", base_dir=to)

    def write(self, to: Path) -> list[Path]:
        """The files, into ``to`` (refused when it holds a gate.yaml or any file the import
        would write: nothing is overwritten); their paths. Everything is checked before the
        first file is written, and a write that fails takes back what it wrote: an error
        leaves no half an import behind."""
        if (to / "gate.yaml").exists():
            raise UsageError(f"{to / 'gate.yaml'} exists: import into a new folder and merge by hand")
        planned = self.files(to)
        there = next((path for path, _ in planned if path.exists() or path.is_symlink()), None)
        if there is not None:
            raise UsageError(f"{there} exists: import into a new folder and merge by hand")
        to.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".import-", dir=to))  # checked there, then moved in
        written: list[Path] = []
        try:
            for path, text in planned:
                _write(staging / path.relative_to(to), text)
            self.check(staging)
            for path, _ in planned:
                path.parent.mkdir(parents=True, exist_ok=True)
                os.link(staging / path.relative_to(to), path)  # FileExistsError rather than overwrite
                written.append(path)
        except OSError as exc:
            _take_back(written)
            raise UsageError(f"{to}: cannot write the import: {exc.strerror or exc}") from None
        except BaseException:
            _take_back(written)
            raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return written

    def files(self, to: Path) -> list[tuple[Path, str]]:
        """Every file the import writes, with its text."""
        out = [
            (to / "datasets" / f"{name}.jsonl", "".join(_jsonl(r) for r in rows))
            for name, rows in self.datasets.items()
        ]
        for folder, files in (("prompts", self.prompts), ("judges", self.judges)):
            out += [(to / folder / f"{name}.yaml", _yaml(data)) for name, data in files.items()]
        if self.mappings:
            out.append((to / "gate.yaml", _yaml(self.config())))
        out.append((to / "IMPORT.txt", "\n".join(self.lines()) + "\n"))
        return out

    def lines(self) -> list[str]:
        """What was imported and, one line each, everything that was not."""
        out = [
            f"imported from {self.source}: {len(self.prompts)} prompt(s), {len(self.datasets)} dataset(s) "
            f"({sum(len(r) for r in self.datasets.values())} rows), {len(self.judges)} judge skeleton(s)"
        ]
        out += [f"note: {n}" for n in self.notes]
        if self.skipped:
            out.append(f"not imported ({len(self.skipped)}):")
            out += [f"  {s.line()}" for s in self.skipped]
        else:
            out.append("not imported: nothing")
        return out


def gate_name(text: str, fallback: str) -> str:
    """A name the gate takes (lowercase letters, digits, . _ -; at most 64) from ``text``."""
    name = NAME_CHARS.sub("-", str(text).lower()).strip("-._")[:64].strip("-._")
    return name if name and name[0].isalnum() else fallback


def unique(name: str, taken: set[str]) -> str:
    found, n = name, 2
    while found in taken:
        found, n = f"{name[:60]}-{n}", n + 1
    taken.add(found)
    return found


def read_source(path: Path) -> str:
    """A source file's text, bounded; one line when it cannot be read."""
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if len(data) > MAX_SOURCE_BYTES:
        raise UsageError(f"{path}: over {MAX_SOURCE_BYTES // (1024 * 1024)} MiB: not an eval file to import")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("x", encoding="utf-8") as fh:  # never through a file (or a link) put there meanwhile
        fh.write(text)
    return path


def _take_back(written: list[Path]) -> None:
    for path in written:
        path.unlink(missing_ok=True)


def _jsonl(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False) + "\n"


def _yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
