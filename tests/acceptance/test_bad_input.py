"""Input that used to fail late, hang or be silently misread, through the real `promptgate`
command: each is refused at once, in one line that names what is wrong (exit 2, no
traceback)."""

from __future__ import annotations

import subprocess
import time

import pytest
from support.cli import run_cli

from gate.domain.gate import check_commit_sha
from gate.errors import UsageError


def refused(result, *words: str) -> None:
    """One line on stderr, exit 2, no traceback, naming each of ``words``."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for word in words:
        assert word in result.stderr, (word, result.stderr)


@pytest.mark.parametrize(
    "variable, value",
    [("PROMPTGATE_CHUNK_SIZE", "0"), ("PROMPTGATE_PAGE_SIZE", "0"), ("PROMPTGATE_LEASE_SECONDS", "-1")],
)
def test_a_worker_with_a_setting_out_of_range_does_not_start(tmp_path, variable, value):
    try:
        result = run_cli(
            "worker", env={variable: value, "PROMPTGATE_DATABASE_URL": f"sqlite:///{tmp_path / 'g.db'}"}, timeout=20
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{variable}={value}: the worker started anyway") from None
    refused(result, f"{variable}={value}", "allowed")


# --- prompt files and submissions ------------------------------------------------------------

PROMPT = "name: p1\nmodel: m\nlabels: [yes, no]\nmessages:\n  - {role: user, content: '{{ item.text }}'}\n"


def registered(db: str, tmp_path) -> None:
    data = tmp_path / "d.csv"
    data.write_text("item_id,expected_decision,text\n1,yes,a\n")
    assert run_cli("dataset", "add", "d", "--source", data, "--database-url", db).returncode == 0
    assert run_cli("dataset", "map", "p1", "d", "--min-accuracy", "0.5", "--database-url", db).returncode == 0


def test_a_sha_that_is_not_a_full_commit_id_is_refused_on_every_backend(db_url, tmp_path):
    assert run_cli("db", "upgrade", "--database-url", db_url).returncode == 0
    registered(db_url, tmp_path)
    (tmp_path / "p.yaml").write_text(PROMPT)
    refused(
        run_cli("submit", tmp_path / "p.yaml", "--sha", "a" * 100, "--database-url", db_url), "40 or 64 hex characters"
    )
    assert run_cli("submit", tmp_path / "p.yaml", "--sha", "a" * 40, "--database-url", db_url).returncode == 0
    listed = run_cli("wait", "--sha", "a" * 40, "--mode", "check", "--timeout", "0.1", "--database-url", db_url)
    assert listed.returncode == 3  # found (still open), not "no update was submitted"
    for sha in ("abc123", "g" * 40, "a" * 41):  # the same check, through the service
        with pytest.raises(UsageError, match="40 or 64 hex characters"):
            check_commit_sha(sha)
    check_commit_sha("B" * 64)


def test_submit_dev_zero_ends_at_once(tmp_path):
    started = time.monotonic()
    refused(
        run_cli("submit", "/dev/zero", "--database-url", f"sqlite:///{tmp_path / 'g.db'}", timeout=30),
        "/dev/zero",
        "over the 256 KiB limit",
    )
    assert time.monotonic() - started < 20


def test_a_duplicate_key_in_a_prompt_file_or_a_gate_config_names_file_line_and_key(tmp_path):
    db = f"sqlite:///{tmp_path / 'g.db'}"
    (tmp_path / "dup.yaml").write_text(PROMPT + "description: one\ndescription: two\n")
    refused(
        run_cli("submit", tmp_path / "dup.yaml", "--database-url", db),
        "dup.yaml",
        "line 7",
        "duplicate key 'description'",
    )
    (tmp_path / "gate.yaml").write_text("datasets:\n  d: {source: d.csv}\n  d: {source: e.csv}\nprompts: {}\n")
    refused(run_cli("sync", tmp_path / "gate.yaml", "--database-url", db), "gate.yaml", "line 3", "duplicate key 'd'")


# --- datasets --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, suffix, words",
    [
        (None, None, ["/etc/passwd", "unsupported file type"]),
        (b"root:x:0:0:root:/root:/bin/bash\n", ".csv", ["line 1", "'item_id'"]),
        (b"item_id,label,text\n1,yes,a\n", ".csv", ["line 1", "'expected_decision'"]),
        (b"item_id,expected_decision,text,text\n1,yes,a,b\n", ".csv", ["line 1", "'text'", "twice"]),
        (b'{"id": "1", "expected_decision": "yes"}\n', ".jsonl", ["line 1", "'item_id'"]),
    ],
)
def test_a_dataset_is_checked_when_it_is_added(tmp_path, content, suffix, words):
    source = "file:///etc/passwd"
    if content is not None:
        path = tmp_path / f"d{suffix}"
        path.write_bytes(content)
        source = str(path)
    db = f"sqlite:///{tmp_path / 'g.db'}"
    refused(run_cli("dataset", "add", "d", "--source", source, "--database-url", db), *words)
    assert run_cli("dataset", "list", "--database-url", db).stdout.startswith("no datasets")
