"""Drift: the prompt files of a commit against what is live, one rule run by `promptgate drift`
and the Action's ``mode: drift`` on either gate (``Gate`` or ``RemoteGate``: a read token).

Each prompt is in one state: **in-step** (the file's config is the live one; during a canary
rollout, the canary), **differs** (another config is live: its version, the update or
rollback that made it, and a diff of the two configs), **live-only** (live, and no file
defines it; with a gate config, only the prompts it declares count), **file-only** (a file
defines it and it was never live), **pending** (an apply-mode update of the file's very
config is still open: it will be live, or say why not), or **invalid** (a file that cannot be
read as a prompt). A rollback, an apply rejected after the merge, or an edit applied by
hand all show as differs."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml

from gate.errors import GateError, NotFound
from gate.untrusted import one_line

STATES = ("in-step", "differs", "live-only", "file-only", "pending", "invalid")
MAX_DIFF_LINES = 200


@dataclass(frozen=True)
class Drift:
    prompt: str
    state: str
    path: str | None = None
    live_version: int | None = None
    made_by: str | None = None  # how the live version went live
    diff: tuple[str, ...] = ()  # live's config → the file's, unified, as YAML
    pending: tuple[int, ...] = ()  # open apply-mode updates of the prompt
    note: str | None = None  # a canary rollout in progress; why a file is invalid
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["diff"] = list(self.diff)
        data["pending"] = list(self.pending)
        data.pop("extra")
        return data


class _TextDumper(yaml.SafeDumper):
    """YAML whose multi-line strings (a prompt's messages) are blocks (``|``), one line of
    text per line, so their diff reads as a diff of the text; PyYAML's default wrote them as
    one quoted string, folded, with a blank line for each line break."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_TextDumper.add_representer(str, _text)


def config_diff(live: dict, file: dict, path: str, version: int) -> tuple[str, ...]:
    """A readable diff of two configs: each as YAML (its text as blocks), unified, at most
    ``MAX_DIFF_LINES``."""

    def lines(config: dict) -> list[str]:
        return yaml.dump(config, Dumper=_TextDumper, sort_keys=False, allow_unicode=True, width=100).splitlines()

    found = list(difflib.unified_diff(lines(live), lines(file), f"live v{version}", path, lineterm="", n=2))
    if len(found) > MAX_DIFF_LINES:
        found = [*found[:MAX_DIFF_LINES], f"… {len(found) - MAX_DIFF_LINES} more lines"]
    return tuple(found)


def made_by(gate, name: str, live) -> str:
    """How the live version went live, in words: the rollback (who, why) or the update
    (its id, commit, pull request)."""
    if live.kind == "rollback":
        return live.how()
    rows = gate.history(name, 1)
    upd = (rows[0].get("update") if rows else None) or {}
    where = [f"commit {upd['sha'][:12]}" if upd.get("sha") else "", f"PR #{upd['pr']}" if upd.get("pr") else ""]
    said = ", ".join(w for w in where if w)
    return live.how() + (f" ({said})" if said else "")


def pending_applies(gate, name: str) -> list:
    open_ = [u for status in ("PENDING", "RUNNING") for u in gate.list_updates(50, name, status=status)]
    return sorted((u for u in open_ if u.mode == "apply"), key=lambda u: u.id)


def canary_note(gate, name: str) -> str | None:
    found = next((r for r in gate.rollouts(name, 1) if r["status"] == "CANARY"), None)
    if found is None:
        return None
    percent = format(float(found["config"].get("canary_percent", 10)), "g")
    return f"canary v{found['canary_version']} at {percent} % beside stable v{found['stable_version']}"


def one_file(gate, path: str, spec) -> Drift:
    """The state of the prompt one file defines."""
    name = spec.name
    try:
        live = gate.live(name)
    except NotFound:
        live = None
    waiting = pending_applies(gate, name)
    ids = tuple(u.id for u in waiting)
    if any(u.candidate_hash == spec.config_hash for u in waiting):
        return Drift(name, "pending", path, live.version if live else None, pending=ids)
    if live is None:
        return Drift(name, "file-only", path, pending=ids)
    how = made_by(gate, name, live)
    if live.config_hash == spec.config_hash:
        return Drift(name, "in-step", path, live.version, how, pending=ids, note=canary_note(gate, name))
    diff = config_diff(live.config, spec.to_config(), path, live.version)
    return Drift(name, "differs", path, live.version, how, diff, ids, canary_note(gate, name))


def compare(
    gate, files: Iterable[tuple[str, Any]], declared: set[str] | None = None, live_only: bool = True
) -> list[Drift]:
    """Every file's prompt (``files``: (path, PromptSpec, or the error reading it)), then the
    live prompts no file defines (of ``declared`` only, when a gate config gives it; none
    when ``live_only`` is False: files named one by one are compared alone)."""
    found: list[Drift] = []
    seen: dict[str, str] = {}
    for path, spec in files:
        if isinstance(spec, GateError):
            found.append(Drift(path, "invalid", path, note=one_line(str(spec), 300)))
        elif spec.name in seen:
            found.append(Drift(spec.name, "invalid", path, note=f"{spec.name} is also defined in {seen[spec.name]}"))
        else:
            seen[spec.name] = path
            found.append(one_file(gate, path, spec))
    for row in sorted(gate.list_live(), key=lambda r: r["name"]) if live_only else ():
        name = row["name"]
        if name in seen or (declared is not None and name not in declared):
            continue
        live = gate.live(name)
        found.append(Drift(name, "live-only", None, live.version, made_by(gate, name, live)))
    return found


def exit_code(entries: Iterable[Drift]) -> int:
    """0 when every prompt is in step, 1 otherwise."""
    return 0 if all(e.state == "in-step" for e in entries) else 1


def text_lines(entries: list[Drift]) -> list[str]:
    """The CLI's lines: one per prompt, then its diff indented."""
    lines = []
    for e in entries:
        head = f"{e.state:<10} {e.prompt}"
        if e.live_version is not None:
            head += f"  live v{e.live_version}"
        if e.made_by:
            head += f" — {e.made_by}"
        if e.path and e.state != "live-only":
            head += f"  [{e.path}]"
        if e.pending:
            head += f"  open apply: update {', '.join(map(str, e.pending))}"
        if e.note:
            head += f"  ({e.note})"
        lines.append(head)
        lines += [f"    {line}" for line in e.diff]
    counts = {s: sum(e.state == s for e in entries) for s in STATES}
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no prompt")
    return lines
