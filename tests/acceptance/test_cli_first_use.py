"""A newcomer's first commands (issue 24, frictions 5 and 8): the default SQLite file is
named, once, when a command creates it in the current folder; `token list` prints a header
and a created column, as docs/service.md shows it."""

from __future__ import annotations

import os
import subprocess
import sys

from support.cli import ROOT


def promptgate(cwd, *args):
    env = {k: v for k, v in os.environ.items() if k not in ("PROMPTGATE_DATABASE_URL", "PROMPTGATE_URL")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "gate.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_default_database_file_is_named_when_it_is_created(tmp_path):
    first = promptgate(tmp_path, "db", "upgrade")
    assert first.returncode == 0, first.stderr
    created = [line for line in first.stderr.splitlines() if "created the SQLite database" in line]
    assert created == [
        f"promptgate: created the SQLite database {tmp_path / 'promptgate.db'} (the default, "
        "sqlite:///promptgate.db; PROMPTGATE_DATABASE_URL or --database-url names another)"
    ]
    again = promptgate(tmp_path, "token", "list")
    assert again.returncode == 0 and "created the SQLite database" not in again.stderr, again.stderr
    elsewhere = promptgate(tmp_path, "db", "upgrade", "--database-url", f"sqlite:///{tmp_path / 'other.db'}")
    assert elsewhere.returncode == 0 and "created the SQLite database" not in elsewhere.stderr


def test_token_list_has_a_header_and_a_created_column(tmp_path):
    url = f"sqlite:///{tmp_path / 'gate.db'}"
    empty = promptgate(tmp_path, "token", "list", "--database-url", url)
    assert empty.returncode == 0 and empty.stdout.startswith("no tokens: promptgate token create"), empty.stderr
    assert promptgate(tmp_path, "token", "create", "release", "--scope", "read", "--database-url", url).returncode == 0
    listed = promptgate(tmp_path, "token", "list", "--database-url", url).stdout.splitlines()
    assert listed[0].split("\t") == ["name", "scope", "created", "last used", "state"]
    name, scope, created, used, state = listed[1].split("\t")
    assert (name, scope, used, state) == ("release", "read", "never used", "active")
    assert len(created) == 16 and created[4] == "-" and created[13] == ":", created  # 2026-12-01 12:00
