"""Which gate ``PromptRuntime`` reads (``gate.production.target``, issue 50.4): explicit
arguments win; else ``PROMPTGATE_URL`` with production's own token, never the CLI's
``PROMPTGATE_TOKEN``; else ``PROMPTGATE_DATABASE_URL``; else the default SQLite file when it
exists. Each choice says why, without a password."""

from __future__ import annotations

import pytest

from gate.errors import UsageError
from gate.production.target import resolve_target
from gate.settings import Settings

SERVICE = {"PROMPTGATE_URL": "https://gate.example.com", "PROMPTGATE_RUNTIME_TOKEN": "rt-1"}
DB = "mysql+pymysql://app:s3cret@db/promptgate"


def target(tmp_path, env, **given):
    args = {"database_url": None, "gate_url": None, "token": None, "gate": None, "settings": None, **given}
    return resolve_target(**args, env=env, cwd=tmp_path)


def test_the_service_from_the_environment_with_the_runtime_token(tmp_path):
    t = target(tmp_path, {**SERVICE, "PROMPTGATE_TOKEN": "cli-admin", "PROMPTGATE_DATABASE_URL": DB})
    assert (t.kind, t.url, t.token) == ("service", "https://gate.example.com", "rt-1")
    assert (
        t.reason
        == "the gate's service https://gate.example.com (PROMPTGATE_URL; its token from PROMPTGATE_RUNTIME_TOKEN)"
    )


def test_the_clis_token_is_never_productions(tmp_path):
    env = {"PROMPTGATE_URL": "https://gate.example.com", "PROMPTGATE_TOKEN": "cli-admin"}
    with pytest.raises(
        UsageError, match=r"needs a token: token= or PROMPTGATE_RUNTIME_TOKEN .*PROMPTGATE_TOKEN, the CLI's"
    ):
        target(tmp_path, env)
    t = target(tmp_path, {**env, "PROMPTGATE_DATABASE_URL": DB})  # the database, saying why
    assert (t.kind, t.url, t.token) == ("database", DB, None)
    assert "s3cret" not in t.reason and "app:***@db" in t.reason
    assert "PROMPTGATE_URL is set but PROMPTGATE_RUNTIME_TOKEN is not" in t.reason


def test_explicit_arguments_win(tmp_path):
    assert target(tmp_path, SERVICE, database_url=DB).kind == "database"
    t = target(tmp_path, SERVICE, gate_url="http://127.0.0.1:9", token="given")
    assert (t.url, t.token) == ("http://127.0.0.1:9", "given") and t.reason.endswith(
        "(gate_url= given; its token from token=)"
    )
    assert target(tmp_path, SERVICE, settings=Settings(database_url=DB)).url == DB
    assert target(tmp_path, SERVICE, gate=object()).kind == "gate"
    with pytest.raises(UsageError, match="not both"):
        target(tmp_path, {}, database_url=DB, gate_url="http://127.0.0.1:9")


def test_no_gate_named_is_refused_unless_the_default_file_is_there(tmp_path):
    with pytest.raises(
        UsageError, match=r"no gate to read prompts from: set PROMPTGATE_URL and PROMPTGATE_RUNTIME_TOKEN"
    ):
        target(tmp_path, {})
    assert not list(tmp_path.iterdir())
    with pytest.raises(UsageError, match="did you mean PROMPTGATE_DATABASE_URL"):
        target(tmp_path, {"PROMPTGATE_DATABSE_URL": DB})
    (tmp_path / "promptgate.db").write_bytes(b"")
    t = target(tmp_path, {})
    assert (t.kind, t.url) == ("database", "sqlite:///promptgate.db") and "neither PROMPTGATE_URL" in t.reason


def test_a_password_in_the_database_urls_query_stays_out_of_the_log_line(tmp_path):
    """Review: SQLAlchemy hands ``?password=`` to the driver as the password; the line the
    runtime logs printed it (``shown`` masked the user part only)."""
    url = "mysql+pymysql://app@db/promptgate?password=hunter2&charset=utf8mb4"
    t = target(tmp_path, {"PROMPTGATE_DATABASE_URL": url})
    assert (t.kind, t.url) == ("database", url)  # the runtime still connects with it
    assert "hunter2" not in t.reason and "?password=***&charset=utf8mb4" in t.reason, t.reason
    (tmp_path / "gate.db").touch()
    t = target(tmp_path, {}, database_url=f"sqlite:///{tmp_path}/gate.db?secret_key=k1")
    assert "k1" not in t.reason and "/gate.db?secret_key=***" in t.reason, t.reason


def test_a_runtime_creates_no_empty_sqlite_database(tmp_path, monkeypatch):
    """Review: ``PROMPTGATE_DATABASE_URL`` (or ``database_url=``) naming an SQLite file that is
    not there made the driver create an empty one, and the runtime failed on it with "no such
    table: prompt" (issue 50's friction, for any path but the default)."""
    from gate.runtime import PromptRuntime

    monkeypatch.chdir(tmp_path)
    for given in ({"database_url": f"sqlite:///{tmp_path / 'typo.db'}"}, {}):
        monkeypatch.setenv("PROMPTGATE_DATABASE_URL", "sqlite:///typo.db")
        with pytest.raises(UsageError, match=r"is no file .*typo\.db.*never creates an empty one"):
            PromptRuntime(**given)
        assert not (tmp_path / "typo.db").exists()
    assert target(tmp_path, {}, database_url="sqlite://").kind == "database"  # in memory: nothing to find
