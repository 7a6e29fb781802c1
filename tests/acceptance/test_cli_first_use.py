"""A newcomer's first commands (issue 24, frictions 5 and 8): the default SQLite file is
named, once, when a command creates it in the current folder; `token list` prints a header
and a created column, as docs/service.md shows it."""

from __future__ import annotations

import os

from support.cli import run_cli


def promptgate(cwd, *args):
    """The CLI in ``cwd``, forked from the preloaded server (support.cli), with neither a
    database URL nor a gate URL from the test process."""
    return run_cli(*args, cwd=cwd, unset=("PROMPTGATE_DATABASE_URL", "PROMPTGATE_URL"))


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


def test_a_misspelt_database_url_variable_is_named_not_a_new_file(tmp_path):
    """Issue 35.9: PROMPTGATE_DATABSE_URL silently created ./promptgate.db and then suggested
    commands against it; the variable is named, with the one it means, and nothing is made."""
    env_typo = {"PROMPTGATE_DATABSE_URL": f"sqlite:///{tmp_path / 'meant.db'}"}
    os.environ.update(env_typo)
    try:
        typo = promptgate(tmp_path, "dataset", "list")
    finally:
        del os.environ["PROMPTGATE_DATABSE_URL"]
    assert typo.returncode == 2 and typo.stderr == (
        "error: PROMPTGATE_DATABSE_URL is set, but no setting has that name: did you mean PROMPTGATE_DATABASE_URL? "
        "(without it the gate would be sqlite:///promptgate.db, a new file in this folder)\n"
    )
    assert not list(tmp_path.iterdir())


def test_unknown_fields_get_a_did_you_mean(tmp_path):
    (tmp_path / "p.yaml").write_text("name: p\nmodel: m\nmesages: [{role: user, content: hi}]\n")
    url = f"sqlite:///{tmp_path / 'gate.db'}"
    spec = promptgate(tmp_path, "submit", "p.yaml", "--database-url", url)
    assert spec.returncode == 2 and "p.yaml: mesages: unknown field; did you mean messages?" in spec.stderr
    (tmp_path / "gate.yaml").write_text("datasets:\n  d: {source: d.csv, label_colum: label}\n")
    (tmp_path / "d.csv").write_text("item_id,label,text\na,yes,hi\n")
    cfg = promptgate(tmp_path, "sync", "gate.yaml", "--dry-run", "--database-url", url)
    assert cfg.returncode == 2 and "datasets.d.label_colum: unknown field; did you mean label_column?" in cfg.stderr


def test_an_item_field_the_rows_lack_gets_a_did_you_mean(tmp_path):
    url = f"sqlite:///{tmp_path / 'gate.db'}"
    (tmp_path / "d.csv").write_text("item_id,expected_decision,subject\na,yes,hi\nb,no,ho\n")
    assert promptgate(tmp_path, "dataset", "add", "d", "--source", "d.csv", "--database-url", url).returncode == 0
    assert (
        promptgate(tmp_path, "dataset", "map", "p", "d", "--min-accuracy", "0.5", "--database-url", url).returncode == 0
    )
    (tmp_path / "p.yaml").write_text(
        "name: p\nmodel: m\nlabels: [yes, no]\nmessages: [{role: user, content: '{{ item.subjct }}'}]\n"
    )
    refused = promptgate(tmp_path, "submit", "p.yaml", "--database-url", url)
    assert refused.returncode == 2 and "no row of d has it; did you mean subject? (add rows" in refused.stderr, (
        refused.stderr
    )
