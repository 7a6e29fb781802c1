"""The pages quote the CLI as it is (the way tests/unit/test_docs.py keeps the rest of
README.md and docs/ true to the code):

* Every ``promptgate …`` command quoted in a page exists in the click CLI, and every flag
  quoted after it is an option of that command (or of the root group); a quoted command
  without the word (`submit --full`) too; every command of the CLI is quoted somewhere.
* docs/cli.md's "Every flag" table names exactly each command's flags.
* docs/cli.md's "Exit codes" table gives each update state the code gate/states.py gives it.

Each failure says which page, which name, and what to do."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from test_docs import DOCS, TICKED, name_of, pages, section, text_of

from gate import states
from gate.cli import cli
from gate.contract import release


@pytest.fixture(scope="module")
def texts() -> dict[Path, str]:
    return {page: text_of(page) for page in pages()}


# --- the CLI -----------------------------------------------------------------------------------


def command_names(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    found = set()
    for name, command in group.commands.items():
        found.add((*prefix, name))
        if isinstance(command, click.Group):
            found |= command_names(command, (*prefix, name))
    return found


def options(command: click.Command) -> set[str]:
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts) if opt.startswith("--")}


ROOT_OPTIONS = options(cli) | {"--help", "--version"}
SEGMENT_END = re.compile(r"\s(?:#|\||&&|;|>|2>)|[)`]|$")


def invocations(text: str) -> list[str]:
    """Each `promptgate …` command in the page, from its first word to the end of the command
    (a comment, a pipe, a closing parenthesis or backtick)."""
    found = []
    for match in re.finditer(r"\bpromptgate[ \t]+(?=[-a-z])", text):
        rest = text[match.end() :]
        line = rest.split("\n", 1)[0]
        found.append(line[: SEGMENT_END.search(line).start()])
    return found


def bare_invocations(text: str) -> list[str]:
    """Quoted commands without the `promptgate` word that quote a flag: `submit --full`."""
    tops = {name for (name, *_) in command_names()}
    return [
        span
        for span in TICKED.findall(text)
        if "--" in span and span.split()[0] in tops and not span.startswith("promptgate")
    ]


def invocation_problems(page: str, invocation: str) -> list[str]:
    words = invocation.split()
    while words and words[0].startswith("--"):  # root options before the command: --gate-url URL
        flag = words.pop(0).split("=")[0]
        if flag not in ROOT_OPTIONS:
            return [f"{page}: `promptgate {invocation}`: {flag} is no option of promptgate"]
        if words and not words[0].startswith("-") and words[0] not in cli.commands:
            words.pop(0)
    if not words:
        return []
    command: click.Command = cli
    path = []
    while isinstance(command, click.Group) and words:
        name = re.split(r"[|\[]", words[0])[0]
        if name not in command.commands:
            if command is cli:
                return [f"{page}: `promptgate {invocation}`: promptgate has no command {name!r}"]
            if not re.fullmatch(r"[a-z][a-z-]*", name):
                break  # an argument or a placeholder: `dataset list|unmap|…`
            return [f"{page}: `promptgate {invocation}`: {' '.join(path)} has no subcommand {name!r}"]
        path.append(name)
        words.pop(0)
        command = command.commands[name]
    known = options(command) | ROOT_OPTIONS
    return [
        f"{page}: `promptgate {invocation}`: {flag} is no option of `promptgate {' '.join(path)}`"
        for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", " ".join(words))
        if flag not in known
    ]


def quoted_commands(text: str) -> set[tuple[str, ...]]:
    """The commands and subcommands a page quotes: `promptgate dataset add …`, `cancel ID`,
    `dataset list|unmap|preview` (each alternative)."""
    tops, found = {name for (name, *_) in command_names()}, set()
    for span in [*TICKED.findall(text), *re.findall(r"^promptgate .*$", text, re.M)]:
        words = span.split()
        words = words[1:] if words[:1] == ["promptgate"] else words
        if words and words[0] in tops:
            found.add((words[0],))
            found |= {(words[0], alt) for alt in (words[1].split("|") if len(words) > 1 else ())}
    return found


def cli_problems(texts: dict[Path, str]) -> list[str]:
    problems, quoted = [], set()
    for page, text in texts.items():
        for invocation in [*invocations(text), *bare_invocations(text)]:
            problems += invocation_problems(name_of(page), invocation)
        quoted |= quoted_commands(text)
    problems += [
        f"the command `promptgate {' '.join(name)}` is quoted in no page: document it in docs/cli.md"
        for name in sorted(command_names() - quoted)
    ]
    return problems


def test_every_command_and_flag_the_pages_quote_exists_and_every_command_is_quoted(texts):
    problems = cli_problems(texts)
    assert problems == [], "\n".join(problems)


def test_a_renamed_command_and_flag_are_named(texts):
    page = DOCS / "cli.md"
    drifted = {
        **texts,
        page: texts[page] + "\n`promptgate dataset remove x`, `promptgate wait ID --until-promoted`, `submit --fast`\n",
    }
    problems = cli_problems(drifted)
    assert "docs/cli.md: `promptgate dataset remove x`: dataset has no subcommand 'remove'" in problems, problems
    assert "docs/cli.md: `promptgate wait ID --until-promoted`: --until-promoted is no option of `promptgate wait`" in (
        problems
    )
    assert "docs/cli.md: `promptgate submit --fast`: --fast is no option of `promptgate submit`" in problems


TARGET_OPTIONS = {"--database-url", "--gate-url"}  # every command's, said once above the table


def leaf_commands(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> dict[str, click.Command]:
    found = {}
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found |= leaf_commands(command, (*prefix, name))
        else:
            found[" ".join(("promptgate", *prefix, name))] = command
    return found


def flag_table_problems(text: str) -> list[str]:
    """docs/cli.md's "Every flag": a row per command naming exactly its flags (beside
    --database-url and --gate-url), and the root group's row exactly the root's."""
    where = "docs/cli.md, section 'Every flag'"
    rows = {}
    for line in section(text, "Every flag").splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| `") else []
        if len(cells) == 2:
            name = TICKED.findall(cells[0])[0]
            rows[name] = {f for span in TICKED.findall(cells[1]) for f in span.split("/")}
    commands = {**leaf_commands(), "promptgate": cli}
    problems = [f"{where}: no row for `{c}`: add | `{c}` | its flags |" for c in sorted(set(commands) - set(rows))]
    problems += [f"{where}: the row `{c}` names no command: remove it" for c in sorted(set(rows) - set(commands))]
    for name in sorted(set(rows) & set(commands)):
        have = options(commands[name]) - (TARGET_OPTIONS if name != "promptgate" else set())
        problems += [f"{where}: the row `{name}` lacks `{f}`: add it" for f in sorted(have - rows[name])]
        problems += [
            f"{where}: the row `{name}` names `{f}`, which it does not take" for f in sorted(rows[name] - have)
        ]
    return problems


def test_the_flag_table_names_every_flag_of_every_command():
    problems = flag_table_problems(text_of(DOCS / "cli.md"))
    assert problems == [], "\n".join(problems)


def test_a_flag_missing_from_the_table_or_invented_is_named():
    text = text_of(DOCS / "cli.md").replace("`--allow-none`, ", "").replace("`--rows`", "`--limit`")
    assert flag_table_problems(text) == [
        "docs/cli.md, section 'Every flag': the row `promptgate dataset preview` lacks `--rows`: add it",
        "docs/cli.md, section 'Every flag': the row `promptgate dataset preview` names `--limit`, "
        "which it does not take",
        "docs/cli.md, section 'Every flag': the row `promptgate wait` lacks `--allow-none`: add it",
    ]


def exit_code_problems(text: str) -> list[str]:
    """docs/cli.md's "Exit codes": each update state's row is the code gate/states.py gives it."""
    where = "docs/cli.md, section 'Exit codes'"
    rows = {}
    for line in section(text, "Exit codes").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0].isdigit():
            rows[int(cells[0])] = cells[1]
    wanted = {str(status): code for status, code in states.EXIT_CODES.items()}
    problems = [
        f"{where}: {status} exits {code} (gate/states.py: EXIT_CODES), the row {code} does not say so"
        for status, code in wanted.items()
        if not re.search(rf"\b{status}\b", rows.get(code, "").split("(")[0])
    ]
    for code, words in ((states.EXIT_NOT_JUDGED, "not judged"), (release.EXIT_NOTHING_TO_GATE, "nothing to gate")):
        if words not in rows.get(code, ""):
            problems.append(f"{where}: the row {code} must say '{words}' (gate/states.py, gate/contract/release.py)")
    return problems


def test_the_exit_codes_are_the_codes_the_cli_gives():
    assert exit_code_problems(text_of(DOCS / "cli.md")) == []


def test_an_exit_code_that_drifted_is_named():
    text = text_of(DOCS / "cli.md").replace("| 2 | FAILED or CANCELLED |", "| 2 | FAILED |")
    assert exit_code_problems(text) == [
        "docs/cli.md, section 'Exit codes': CANCELLED exits 2 (gate/states.py: EXIT_CODES), the row 2 does not say so"
    ]
