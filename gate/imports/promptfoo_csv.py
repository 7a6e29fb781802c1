"""promptfoo's tests from a CSV file (``tests: file://tests.csv``), as the test mappings its
config would hold: each column a variable, ``__description`` the test's description, and each
``__expected`` column (``__expected1``, ...) one assert written as promptfoo writes it there:
``type: value`` (``contains: refund``, ``not-icontains: sorry``, ``regex: ORD-[0-9]+``), a bare
type (``is-json``), ``grade: rubric`` for an ``llm-rubric``, or plain text for ``equals``."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

from gate.errors import UsageError

from .bundle import read_source

TYPED = re.compile(r"^(?P<type>(?:not-)?[a-z][a-z0-9-]*)(?:\((?P<threshold>[^)]*)\))?:\s?(?P<value>.*)$", re.DOTALL)
BARE = re.compile(r"^(?:not-)?(?:is-json|contains-json|is-valid-openai-tools-call|is-xml|contains-xml|is-sql)$")
MAX_CELL = 64 * 1024


def csv_tests(path: Path) -> list[dict[str, Any]]:
    """The file's rows as promptfoo test mappings (one line, naming the file, when unreadable)."""
    try:
        rows = list(csv.DictReader(io.StringIO(read_source(path))))
    except csv.Error as exc:
        raise UsageError(f"{path}: not a CSV file: {exc}") from None
    for number, row in enumerate(rows, start=2):
        _within_cell_limit(path, number, row)
    return [_test(row) for row in rows]


def _within_cell_limit(path: Path, line: int, row: dict[str, Any]) -> None:
    """A cell over ``MAX_CELL`` characters is refused here, not through
    ``csv.field_size_limit``: that limit is the process's, and lowering it would refuse the
    long cells of every other CSV this process reads (a dataset registered after an import)."""
    for column, value in row.items():
        cells = value if isinstance(value, list) else [value]  # a row longer than its header
        if any(isinstance(c, str) and len(c) > MAX_CELL for c in cells):
            raise UsageError(f"{path}: row {line}, column {column!r}: a cell over {MAX_CELL:,} characters")


def _test(row: dict[str, Any]) -> dict[str, Any]:
    variables = {k: v for k, v in row.items() if k and not k.startswith("__")}
    asserts = [_assert(v) for k, v in row.items() if k and k.startswith("__expected") and v]
    test: dict[str, Any] = {"vars": variables, "assert": asserts}
    if row.get("__description"):
        test["description"] = row["__description"]
    return test


def _assert(cell: str) -> dict[str, Any]:
    text = cell.strip()
    if BARE.match(text):
        return {"type": text}
    typed = TYPED.match(text)
    if typed is None:
        return {"type": "equals", "value": cell}
    kind = "llm-rubric" if typed.group("type") == "grade" else typed.group("type")
    return {"type": kind, "value": typed.group("value")}
