"""README.md and docs/ cannot drift from the code, as docs/architecture.md cannot
(tests/unit/test_architecture_doc.py): the pages are read as data and compared with what the
code declares.

* Every page under docs/ is reachable from docs/README.md (the index), and the index from
  README.md; every relative link resolves, and so does its ``#anchor`` (GitHub's heading
  slugs).
* README stays short: what the tool is, the two commands (``make demo``, ``make test``: both
  Makefile targets, and CI's ``.ci/run`` runs the test one), a five-minute start, links.
* Every ``PROMPTGATE_*`` / ``OPENAI_*`` variable a page names is read by the code, and every
  ``PROMPTGATE_*`` variable the code reads is named in a page.
* docs/prompt-file.md's "Every field" table names exactly the fields of
  gate/schemas/prompt.schema.json; docs/gate-config.md's "Every key" tables exactly the
  gate config's sections, a dataset's keys, a mapping's keys and a rollout's.
* Every test a page names (``file.py::test``) exists, and every ``path/file.py`` it names.

The CLI's commands, flags and exit codes are checked in test_docs_cli.py. Each failure says
which page, which name, and what to do."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import pytest
from support.cli import ROOT
from test_security_doc import functions_of, named_tests

from gate.calls.providers import FIELDS as PROVIDER_FIELDS
from gate.calls.spend_caps import KEYS as LIMIT_KEYS
from gate.gateconfig.parse import BAR_FIELDS, DATASET_FIELDS, TOP_FIELDS
from gate.rollout.rule import FIELDS as ROLLOUT_FIELDS

DOCS = ROOT / "docs"
README = ROOT / "README.md"
INDEX = DOCS / "README.md"
README_MAX_LINES = 200
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
TICKED = re.compile(r"`([^`\n]+)`")
ENV = re.compile(r"\b((?:PROMPTGATE|OPENAI)_[A-Z0-9_]*[A-Z0-9])\b")
# variables the code reads that are no user's setting: the test suite's own, and the budget a
# worker hands its template sandbox process (gate/prompt/sandbox.py)
NOT_A_SETTING = re.compile(r"PROMPTGATE_TEST_\w+|PROMPTGATE_SANDBOX_BUDGET")


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def name_of(page: Path) -> str:
    return str(page.relative_to(ROOT))


@lru_cache
def text_of(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def prose(text: str) -> str:
    """The text outside fenced code blocks (links and headings live there)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


# --- links and anchors ------------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    found, seen = set(), {}
    for heading in re.findall(r"^#{1,6} (.+)$", prose(text), re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(page: Path, text: str) -> list[tuple[str, Path | None, str]]:
    """(link as written, the file it names or None for the page itself, its anchor) of each
    relative link outside code blocks."""
    found = []
    for target in LINK.findall(prose(text)):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        found.append((target, (page.parent / path).resolve() if path else None, anchor))
    return found


def link_problems(page: Path, text: str) -> list[str]:
    problems = []
    for target, path, anchor in links(page, text):
        where = f"{name_of(page)}: the link ({target})"
        if path is not None and not path.exists():
            problems.append(f"{where} names a file that does not exist: fix the path")
            continue
        if anchor:
            linked = text if path is None else text_of(path) if path.suffix == ".md" else None
            if linked is not None and anchor not in anchors(linked):
                problems.append(f"{where}: no heading of that page has the anchor #{anchor}")
    return problems


def unreachable_pages(texts: dict[Path, str]) -> list[str]:
    """The docs pages no chain of links from README.md through docs/README.md reaches."""
    if INDEX not in {p for _, p, _ in links(README, texts[README]) if p}:
        return ["README.md does not link docs/README.md (the index)"]
    seen, todo = {INDEX}, [INDEX]
    while todo:
        page = todo.pop()
        for _, path, _ in links(page, texts[page]):
            if path in texts and path not in seen and path.parent == DOCS:
                seen.add(path)
                todo.append(path)
    return [
        f"docs/{p.name} is reachable from no link of docs/README.md (directly or through a page it links): "
        "add it to the index"
        for p in sorted(texts)
        if p.parent == DOCS and p not in seen
    ]


@pytest.fixture(scope="module")
def texts() -> dict[Path, str]:
    return {page: text_of(page) for page in pages()}


def test_every_link_and_anchor_resolves(texts):
    problems = [p for page, text in texts.items() for p in link_problems(page, text)]
    assert problems == [], "\n".join(problems)


def test_every_docs_page_is_reachable_from_the_index(texts):
    assert unreachable_pages(texts) == []


def test_a_broken_link_an_anchor_and_an_orphan_page_are_named(texts):
    broken = texts[DOCS / "cli.md"] + "\n[x](no-such-page.md) [y](report.md#no-such-heading) [z](#every-command)\n"
    problems = link_problems(DOCS / "cli.md", broken)
    assert problems == [
        "docs/cli.md: the link (no-such-page.md) names a file that does not exist: fix the path",
        "docs/cli.md: the link (report.md#no-such-heading): no heading of that page has the anchor #no-such-heading",
    ]
    orphaned = {**texts, INDEX: texts[INDEX].replace("(judges.md)", "(judges.txt)")}
    orphaned = {p: t.replace("(judges.md", "(judge.md") for p, t in orphaned.items()}
    assert any(p.startswith("docs/judges.md is reachable from no link") for p in unreachable_pages(orphaned))


# --- README: short, the two commands true -------------------------------------------------------


def test_readme_is_short_and_its_two_commands_are_true():
    text = text_of(README)
    assert len(text.splitlines()) <= README_MAX_LINES, "README.md is a start page: move detail into docs/"
    block = re.search(r"^## The two commands\n+```sh\n(.*?)```", text, re.S | re.M)
    assert block, "README.md has no '## The two commands' block"
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert commands == ["make demo", "make test"], commands
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    ci = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line and not line.startswith(("#", "set ", "cd "))
    ]
    assert ci == ["make test"], ci


# --- environment variables -----------------------------------------------------------------------


@lru_cache
def code_text() -> str:
    files = [*(ROOT / "gate").rglob("*.py"), *(ROOT / "workers").rglob("*.py")]
    return "\n".join(f.read_text(encoding="utf-8") for f in files)


def env_problems(texts: dict[Path, str]) -> list[str]:
    code = code_text()
    read = {v for v in re.findall(r"[\"']((?:PROMPTGATE|OPENAI)_[A-Z0-9_]+)[\"']", code)}
    named: dict[str, str] = {}
    for page, text in texts.items():
        secrets = set(re.findall(r"secrets\.(\w+)", text))  # a GitHub secret's name, not a variable
        for variable in set(ENV.findall(text)) - secrets:
            named.setdefault(variable, name_of(page))
    problems = [
        f"{page}: names {v}, which no code in gate/ or workers/ reads: rename or remove it"
        for v, page in sorted(named.items())
        if v not in code
    ]
    problems += [
        f"{v} is read by the code and named in no page: document it (docs/operations.md lists the settings)"
        for v in sorted(read - set(named))
        if v.startswith("PROMPTGATE_") and not NOT_A_SETTING.fullmatch(v)
    ]
    return problems


def test_every_variable_named_is_read_and_every_setting_is_named(texts):
    problems = env_problems(texts)
    assert problems == [], "\n".join(problems)


def test_a_renamed_variable_is_named(texts):
    page = DOCS / "operations.md"
    drifted = {p: t.replace("PROMPTGATE_LEASE_SECONDS", "PROMPTGATE_LEASE_SECS") for p, t in texts.items()}
    problems = env_problems(drifted)
    assert (
        f"{name_of(page)}: names PROMPTGATE_LEASE_SECS, which no code in gate/ or workers/ reads: rename or remove it"
        in (problems)
    ), problems
    assert any(p.startswith("PROMPTGATE_LEASE_SECONDS is read by the code and named in no page") for p in problems)


# --- the prompt file's fields and the gate config's keys ------------------------------------------


def section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    return match.group(1) if match else ""


def tables(text: str) -> list[list[str]]:
    """The first cell's ticked name of each body row, per Markdown table in ``text``."""
    found, rows = [], None
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            rows = [] if rows is None else rows
            rows.append(line)
        elif rows is not None:
            found.append([TICKED.findall(r.split("|")[1])[0] for r in rows[2:] if TICKED.findall(r.split("|")[1])])
            rows = None
    return found


def table_problems(where: str, table: list[str], code: tuple[str, ...] | set[str], what: str) -> list[str]:
    problems = [f"{where}: no row for `{k}` ({what}): add it" for k in sorted(set(code) - set(table))]
    problems += [f"{where}: the row `{k}` names no {what}: remove or rename it" for k in sorted(set(table) - set(code))]
    return problems


def prompt_field_problems(text: str) -> list[str]:
    schema = json.loads((ROOT / "gate" / "schemas" / "prompt.schema.json").read_text())
    found = tables(section(text, "Every field"))
    where = "docs/prompt-file.md, section 'Every field'"
    if not found:
        return [f"{where}: no table"]
    return table_problems(where, found[0], set(schema["properties"]), "field of gate/schemas/prompt.schema.json")


def gate_config_problems(text: str) -> list[str]:
    where = "docs/gate-config.md, section 'Every key'"
    found = tables(section(text, "Every key"))
    if len(found) != 4:
        return [f"{where}: expected 4 tables (sections, a dataset, a mapping, a rollout), found {len(found)}"]
    problems = table_problems(f"{where}, the sections", found[0], TOP_FIELDS, "section of the gate config")
    problems += table_problems(f"{where}, a dataset", found[1], DATASET_FIELDS, "key of a dataset")
    problems += table_problems(f"{where}, a mapping", found[2], BAR_FIELDS, "key of a mapping (gateconfig.parse)")
    problems += table_problems(f"{where}, a rollout", found[3], ROLLOUT_FIELDS, "key of a rollout (rollout.rule)")
    sections = section(text, "Every key")
    problems += [
        f"{where}: the sections table does not name `{k}`"
        for k in (*PROVIDER_FIELDS, *LIMIT_KEYS)
        if not re.search(rf"\b{k}\b", sections)
    ]
    return problems


def test_the_prompt_file_reference_names_every_field_of_the_schema():
    assert prompt_field_problems(text_of(DOCS / "prompt-file.md")) == []


def test_the_gate_config_reference_names_every_key():
    assert gate_config_problems(text_of(DOCS / "gate-config.md")) == []


def test_a_field_or_key_missing_or_invented_is_named():
    fields = text_of(DOCS / "prompt-file.md").replace("| `trial_rule` |", "| `trial_mode` |")
    assert prompt_field_problems(fields) == [
        "docs/prompt-file.md, section 'Every field': no row for `trial_rule` (field of "
        "gate/schemas/prompt.schema.json): add it",
        "docs/prompt-file.md, section 'Every field': the row `trial_mode` names no field of "
        "gate/schemas/prompt.schema.json: remove or rename it",
    ]
    keys = text_of(DOCS / "gate-config.md").replace("| `min_judge_kappa` |", "| `min_kappa` |")
    assert "docs/gate-config.md, section 'Every key', a mapping: no row for `min_judge_kappa` (key of a mapping " in (
        "\n".join(gate_config_problems(keys))
    )


# --- tests and files a page names ------------------------------------------------------------------


def reference_problems(page: str, text: str) -> list[str]:
    problems = [
        f"{page}: names {file}::{test}, which does not exist: name the test that shows it"
        for file, test in named_tests(text)
        if test not in functions_of(file)
    ]
    for path in re.findall(
        r"`((?:gate|workers|tests|bench|prompts-example|sql)/[\w./-]+\.(?:py|json|yaml|jsonl|csv))", text
    ):
        if not (ROOT / path).exists():
            problems.append(f"{page}: names {path}, which does not exist: rename it")
    return problems


def test_every_test_and_file_a_page_names_exists(texts):
    problems = [
        p
        for page, text in texts.items()
        if page.name != "architecture.md"
        for p in reference_problems(name_of(page), text)
    ]
    assert problems == [], "\n".join(problems)


def test_a_renamed_test_in_the_reliability_table_is_named():
    text = text_of(DOCS / "operations.md").replace("::test_kill_9_chaos", "::test_kill_nine_chaos")
    assert reference_problems("docs/operations.md", text) == [
        "docs/operations.md: names test_workers.py::test_kill_nine_chaos, which does not exist: "
        "name the test that shows it"
    ]
