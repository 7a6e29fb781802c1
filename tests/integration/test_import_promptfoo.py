"""Issue 50.2: a promptfoo config, written in promptfoo's documented format and checked
against the schema its npm package ships, is evaluated by promptfoo itself (``make
promptfoo`` installs it from the npm registry) and, after ``promptgate import promptfoo``, by
the gate (its gate config synced, each prompt submitted, on MariaDB), both against the same
local model server: the pass or fail of every imported test agrees, and the one assert that
does not map (javascript) is listed with its test."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from sqlalchemy import select
from support import judged_env

from gate.gateconfig import sync
from gate.imports.promptfoo import import_promptfoo
from gate.prompt.spec import load_spec
from gate.states import Verdict
from gate.store.schema import prompt_run_item
from workers.supervisor import run_until_terminal

llm = judged_env.llm  # a shared fixture

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / ".cache" / "promptfoo" / "node_modules" / "promptfoo"
BINARY = ROOT / ".cache" / "promptfoo" / "node_modules" / ".bin" / "promptfoo"
VALIDATE = Path(__file__).resolve().parents[1] / "support" / "promptfoo_validate.mjs"

SYSTEM = (
    "Draft a reply.\\n- reply when charged: We are sorry about order {{order_id}}: a refund has been issued.\\n"
    '- reply when status: {\\"status\\": \\"open\\", \\"order\\": \\"{{order_id}}\\"}\\n'
    "- reply when password: You can reset your password from the sign-in page."
)
CONFIG = """\
# yaml-language-server: $schema=https://promptfoo.dev/config-schema.json
description: Support drafter
prompts:
  - label: drafter
    raw: |
      [{{"role": "system", "content": "{system}"}},
       {{"role": "user", "content": "{{{{ticket}}}}"}}]
providers:
  - id: openai:chat:mock-1
    config: {{apiBaseUrl: "{base_url}", apiKey: test-key, temperature: 0}}
defaultTest:
  assert:
    - {{type: not-contains, value: guarantee}}
tests:
  - description: refund names the order
    vars: {{ticket: I was charged twice, order_id: ORD-1}}
    assert:
      - {{type: contains, value: "{{{{order_id}}}}"}}
      - {{type: icontains, value: REFUND}}
      - {{type: starts-with, value: We are sorry}}
      - {{type: regex, value: "ORD-[0-9]+"}}
  - description: refund never promised
    vars: {{ticket: I was charged twice again, order_id: ORD-2}}
    assert:
      - {{type: not-icontains, value: refund}}
  - description: status is JSON
    vars: {{ticket: what is the status, order_id: ORD-3}}
    assert: [{{type: is-json}}, {{type: contains-json}}]
  - description: password reply is not JSON
    vars: {{ticket: my password, order_id: ORD-4}}
    assert: [{{type: is-json}}, {{type: contains-json}}]
  - description: password equals
    vars: {{ticket: password again, order_id: ORD-5}}
    assert: [{{type: equals, value: You can reset your password from the sign-in page.}}]
  - description: password does not equal
    vars: {{ticket: password once more, order_id: ORD-6}}
    assert: [{{type: equals, value: Something else}}]
  - description: contains all and any
    vars: {{ticket: charged for order, order_id: ORD-7}}
    assert:
      - {{type: contains-all, value: [sorry, ORD-7]}}
      - {{type: icontains-any, value: [nothing, ISSUED]}}
  - description: code beside a check
    vars: {{ticket: password help, order_id: ORD-8}}
    assert:
      - {{type: javascript, value: output.length < 10}}
      - {{type: contains, value: reset}}
"""


def promptfoo_env(base_url: str, home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "OPENAI_API_KEY": "test-key",
        "OPENAI_BASE_URL": base_url,
        "PROMPTFOO_CONFIG_DIR": str(home),
        "PROMPTFOO_DISABLE_TELEMETRY": "1",
        "PROMPTFOO_DISABLE_UPDATE": "1",
        "PROMPTFOO_DISABLE_SHARING": "1",
    }


def promptfoo_verdicts(config: Path, env: dict[str, str]) -> dict[str, bool]:
    """promptfoo's own pass or fail of each test, by its description."""
    out = config.parent / "results.json"
    subprocess.run(
        [str(BINARY), "eval", "-c", str(config), "--no-cache", "--no-table", "--no-progress-bar", "-o", str(out)],
        env=env,
        cwd=config.parent,
        capture_output=True,
        timeout=180,
    )  # exits non-zero when a test fails: the results say which
    results = json.loads(out.read_text())["results"]["results"]
    return {r["testCase"]["description"]: bool(r["success"]) for r in results}


def gate_verdicts(gate, folder: Path) -> dict[str, bool]:
    """The gate's verdict of each imported item: its gate config synced, each prompt submitted."""
    sync(gate, folder / "gate.yaml")
    updates = [gate.submit(load_spec(p)) for p in sorted((folder / "prompts").glob("*.yaml"))]
    reports = run_until_terminal(gate, updates, timeout=120)
    runs = [r.runs[0].run_id for r in reports]
    i = prompt_run_item
    with gate.engine.connect() as conn:
        rows = conn.execute(select(i.c.item_id, i.c.verdict).where(i.c.run_id.in_(runs))).all()
    return {item_id: verdict == Verdict.MATCH for item_id, verdict in rows}


def test_promptfoo_and_the_gate_agree_on_every_imported_test(mysql_gate, llm, tmp_path):
    assert BINARY.exists(), "promptfoo is not installed: `make test` installs it (`make promptfoo`)"
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(CONFIG.format(system=SYSTEM, base_url=llm.base_url))
    checked = subprocess.run(
        ["node", str(VALIDATE), str(PACKAGE), str(config)], capture_output=True, text=True, timeout=60
    )
    assert json.loads(checked.stdout.strip().splitlines()[-1]) == {"ok": True, "issues": []}, checked.stderr[-2000:]

    theirs = promptfoo_verdicts(config, promptfoo_env(llm.base_url, tmp_path / ".promptfoo"))
    bundle = import_promptfoo(config)
    bundle.write(tmp_path / "gate")
    ours = gate_verdicts(mysql_gate, tmp_path / "gate")

    listed = [s.line() for s in bundle.skipped]
    assert listed == [
        "tests[8] (code beside a check): assert[1] (javascript): code: the gate runs no code from a config "
        "(a check is data)"
    ]
    imported = {d: v for d, v in theirs.items() if d != "code beside a check"}  # its javascript is not imported
    assert {d: ours[d.lower().replace(" ", "-")] for d in imported} == imported
    assert sorted(imported.values()) == [False, False, False, True, True, True, True]  # both outcomes occur
    assert (tmp_path / "gate" / "IMPORT.txt").read_text().count("javascript") == 1
