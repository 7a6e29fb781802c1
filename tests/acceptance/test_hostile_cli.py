"""Hostile input through the real `promptgate` command: a prompt file nested 5,000 deep is
one line and exit 2, never a traceback; item ids with terminal escapes print inert in
`dataset preview` and `status` (docs/security.md)."""

from __future__ import annotations

from support.cli import run_cli

PROMPT = """name: p
model: m
labels: [yes, no]
messages:
  - {role: user, content: "{{ item.text }}"}
"""


def test_the_cli_refuses_them_in_one_line_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(PROMPT + "response_format: " + "[" * 5000 + "]" * 5000 + "\n")
    out = run_cli("submit", bad, "--database-url", f"sqlite:///{tmp_path / 'g.db'}")
    assert out.returncode == 2 and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "nested deeper than 32 levels" in out.stderr


def test_status_and_preview_print_no_terminal_escapes(tmp_path, monkeypatch):
    from support.helpers import rules_spec

    from gate.domain import Gate
    from gate.mockllm import MockLLMServer
    from workers.supervisor import run_until_terminal

    db = f"sqlite:///{tmp_path / 'g.db'}"
    data = tmp_path / "d.csv"
    data.write_text('item_id,expected_decision,text\n"row\x1b]0;pwned\x07\x1b[2J",yes,beta\nok,no,beta\n')
    assert run_cli("dataset", "add", "d", "--source", data, "--database-url", db).returncode == 0
    preview = run_cli("dataset", "preview", "d", "--database-url", db)
    assert preview.returncode == 0 and "row" in preview.stdout and "\x1b" not in preview.stdout
    gate = Gate.connect(db, upgrade=True)
    gate.map_dataset("p1", "d", "0.9")
    uid = gate.submit(rules_spec("p1"), "check")
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        (report,) = run_until_terminal(gate, [uid], timeout=30)
    gate.close()
    assert report.status == "REJECTED"
    status = run_cli("status", uid, "--database-url", db)
    assert "row" in status.stdout and "\x1b" not in status.stdout and "\x07" not in status.stdout
