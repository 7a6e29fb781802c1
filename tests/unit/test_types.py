"""The type checker over gate/ and workers/ (mypy, configured in pyproject.toml: strict for the
modules written fully annotated, default checks elsewhere), held to a baseline that may only
shrink: ``types_baseline.txt`` beside this file lists the errors the code has, one a line,
without line numbers (so an edit above an error does not move it). A new error fails; so does
a listed error that no longer occurs (it was fixed: take it off the list, so that it cannot
come back unnoticed). ``python tests/unit/test_types.py`` writes the list from the code as it
is; what it adds shows in the diff. The comment at the top of the file (every line up to the
first error) says why what is left is left, by group: the rewrite keeps it as it is.

One test: the check takes ~25 s of CPU and runs in one worker of the pool."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "tests" / "unit" / "types_baseline.txt"
ERROR = re.compile(r"^(?P<path>[^:\s]+\.py):(?P<line>\d+)(?::\d+)?: error: (?P<message>.*)$")


def type_errors() -> list[str]:
    """mypy's errors on the code as it is, each as ``path: message  [code]``."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-pretty", "--no-error-summary", "--show-error-codes"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode not in (0, 1) or done.stderr.strip():
        raise AssertionError(f"mypy did not run (exit {done.returncode}): {done.stderr or done.stdout}")
    return normalised(done.stdout)


def normalised(output: str) -> list[str]:
    """The error lines of mypy's output, without line numbers, sorted."""
    found = []
    for line in output.splitlines():
        match = ERROR.match(line)
        if match:
            found.append(f"{match['path']}: {match['message']}")
    return sorted(found)


HEADER = "# mypy's errors on gate/ and workers/ (tests/unit/test_types.py): fix one, take it off.\n"


def header_of(text: str) -> str:
    """The comment lines at the top of a baseline (up to its first error), which a rewrite
    keeps; the one-line default when there are none."""
    kept = []
    for line in text.splitlines(keepends=True):
        if not line.startswith("#"):
            break
        kept.append(line if line.endswith("\n") else line + "\n")
    return "".join(kept) or HEADER


def baseline() -> list[str]:
    return [line for line in BASELINE.read_text().splitlines() if line and not line.startswith("#")]


def differences(found: list[str], listed: list[str]) -> tuple[list[str], list[str]]:
    """(errors beyond the baseline, baseline entries that no longer occur), counted as
    multisets: a second error of the same text in the same file is a new error."""
    now, before = Counter(found), Counter(listed)
    return sorted((now - before).elements()), sorted((before - now).elements())


def test_no_type_error_beyond_the_baseline_and_the_baseline_only_shrinks():
    new, fixed = differences(type_errors(), baseline())
    assert not new, "new type errors (fix them):\n" + "\n".join(new)
    assert not fixed, (
        "type errors fixed but still in tests/unit/types_baseline.txt (take them off it, "
        "`python tests/unit/test_types.py` rewrites it):\n" + "\n".join(fixed)
    )


def test_a_rewrite_keeps_the_header_comment():
    text = "# first\n# why the rest is left\ngate/a.py: old  [x]\n# not the header\n"
    assert header_of(text) == "# first\n# why the rest is left\n"
    assert header_of("gate/a.py: old  [x]\n") == header_of("") == HEADER


def test_a_new_error_and_a_fixed_one_are_both_named():
    listed = ["gate/a.py: old  [x]", "gate/a.py: old  [x]", "gate/b.py: gone  [y]"]
    found = normalised(
        "gate/a.py:3: error: old  [x]\ngate/a.py:9: error: old  [x]\ngate/a.py:12: error: old  [x]\n"
        "gate/a.py:12: note: a note is not an error\ngate/c.py:1:5: error: new  [z]\n"
    )
    assert differences(found, listed) == (["gate/a.py: old  [x]", "gate/c.py: new  [z]"], ["gate/b.py: gone  [y]"])


if __name__ == "__main__":
    errors = type_errors()
    kept = header_of(BASELINE.read_text()) if BASELINE.exists() else HEADER
    BASELINE.write_text(kept + "".join(f"{e}\n" for e in errors))
    print(f"{len(errors)} errors in {BASELINE.relative_to(ROOT)}")
