"""What production serves, on the domain API (``Served``, a service of ``Gate``): the runtime's
reports (``report_served``) and what a reader sees of them (``served``: per prompt the
versions served and by how many processes, the stale ones named; ``served_counts`` for
/metrics).

A report is untrusted input (through the service, any read token's): every field is
checked and bounded, at most ``MAX_REPORT_PROMPTS`` prompts a report, a row only for a
prompt that has a live version (a runtime serves nothing else; a row for any other name is
not stored), and one token may speak for at most ``MAX_PROCESSES_PER_REPORTER`` active
processes: so what a token keeps is at most that many processes × the live prompts. Its
rows are keyed by the token, so no token's report overwrites another's.

Issue 48: a report counts (``served``, ``served_counts``, ``stale_processes``: what `wait
--served`, the status page and the stale-runtime alert read) only when its reporter may
run the prompt: a runtime on the database, or a runtime token whose prompts include it.
A read token's report is kept and counted apart (``uncounted``), never as a process."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy.engine import Engine

from gate import db
from gate.errors import UsageError
from gate.prompt.call_settings import NAME_RE
from gate.records import ServedProcess
from gate.store.live import find_live, list_live, live_names
from gate.store.served import (
    processes_of_reporter,
    report_served,
    served_counts,
    served_of_prompt,
    stale_processes,
    uncounted_of_prompt,
)

from .boundary import driver_errors_become_gate_errors

DATABASE_REPORTER = "database"  # reports written by a runtime on the database, not through the service
MAX_REPORT_PROMPTS = 100
MAX_PROCESSES_PER_REPORTER = 1000
PROCESS_ID_RE = re.compile(r"[A-Za-z0-9._:@-]{1,96}")
MAX_TTL = 3600.0  # a process claiming a longer ttl still counts as silent after 2 hours


def checked_report(raw: Any) -> dict:
    """One report row, every field checked (UsageError naming it)."""
    if not isinstance(raw, dict):
        raise UsageError("a report is an object: process_id, host, pid, prompt, version, …")
    process_id, host, name = raw.get("process_id"), raw.get("host"), raw.get("prompt")
    if not isinstance(process_id, str) or not PROCESS_ID_RE.fullmatch(process_id):
        raise UsageError("process_id: 1-96 letters, digits, '.', '_', ':', '@' or '-'")
    if not isinstance(host, str) or not 0 < len(host) <= 191 or not host.isprintable():
        raise UsageError("host: 1-191 printable characters")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise UsageError("prompt: not a prompt name")
    return {
        "process_id": process_id,
        "prompt_name": name,
        "host": host,
        "pid": _int(raw.get("pid"), "pid", 0, 2**31 - 1),
        "version": _int(raw.get("version"), "version", 1, 2**31 - 1),
        "stable_version": _int(raw.get("stable_version"), "stable_version", 1, 2**31 - 1, optional=True),
        "rollout_id": _int(raw.get("rollout_id"), "rollout_id", 1, 2**63 - 1, optional=True),
        "loaded_seconds_ago": _seconds(raw.get("loaded_seconds_ago"), "loaded_seconds_ago", 10 * 365 * 86400.0),
        "ttl_seconds": max(1.0, _seconds(raw.get("ttl_seconds"), "ttl_seconds", MAX_TTL)),
    }


def _int(value: Any, name: str, low: int, high: int, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise UsageError(f"{name}: a whole number in [{low}, {high}]")
    return value


def _seconds(value: Any, name: str, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= high:
        raise UsageError(f"{name}: a number of seconds in [0, {high:g}]")
    return float(value)


def versions_served(processes: list[ServedProcess]) -> list[dict]:
    """The processes grouped by what they serve: version (and stable version beside it, a
    canary rollout's), how many processes, how many of them stale; newest first."""
    groups: dict[tuple[int, int | None], dict] = {}
    for p in processes:
        group = groups.setdefault(
            (p.version, p.stable_version),
            {"version": p.version, "stable_version": p.stable_version, "processes": 0, "stale": 0},
        )
        group["processes"] += 1
        group["stale"] += int(p.stale)
    return sorted(groups.values(), key=lambda g: (-g["version"], -(g["stable_version"] or 0)))


@driver_errors_become_gate_errors
class Served:
    """Production's reports and what readers see of them, on one gate database (``engine``)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def report_served(
        self, reports: list, reported_by: str = DATABASE_REPORTER, runs: frozenset[str] | None = None
    ) -> int:
        """Record what a runtime process serves (one row per prompt it reports), under
        ``reported_by`` (the service token's name; ``runs``: the prompts it may run, a runtime
        token's; the service passes an empty set for any other token: its rows are not counted;
        None only on the database itself).
        Returns the rows written: those of prompts with a live version."""
        if not isinstance(reports, list) or len(reports) > MAX_REPORT_PROMPTS:
            raise UsageError(f"a report lists at most {MAX_REPORT_PROMPTS} prompts")
        checked = [checked_report(r) for r in reports]
        for row in checked:
            row["counted"] = int(row["prompt_name"] in runs if runs is not None else reported_by == DATABASE_REPORTER)

        def store(conn) -> int:
            live = live_names(conn, sorted({r["prompt_name"] for r in checked}))
            rows = [r for r in checked if r["prompt_name"] in live]
            if not rows:
                return 0
            ids = sorted({r["process_id"] for r in rows})
            token = reported_by != DATABASE_REPORTER
            if token and processes_of_reporter(conn, reported_by, ids) + len(ids) > MAX_PROCESSES_PER_REPORTER:
                raise UsageError(
                    f"token {reported_by} already reports for {MAX_PROCESSES_PER_REPORTER:,} processes: "
                    "give each production service a token of its own"
                )
            return report_served(conn, reported_by, rows)

        return db.transaction(self.engine, store) if checked else 0

    def served(self, name: str) -> dict:
        """What production serves of prompt ``name``: the live version, each active process
        (``processes``), the versions served and by how many (``versions``), and how many
        processes are stale."""
        with self.engine.connect() as conn:
            live = find_live(conn, name)
            processes = served_of_prompt(conn, name)
            uncounted = uncounted_of_prompt(conn, name)
        return {
            "prompt": name,
            "live_version": live.version if live else None,
            "processes": processes,
            "versions": versions_served(processes),
            "active": len(processes),
            "stale": sum(p.stale for p in processes),
            "uncounted": uncounted,  # reported by tokens that may not run the prompt (read tokens)
        }

    def served_counts(self) -> dict[str, int]:
        """Active (process, prompt) reports and how many of them are stale, over every prompt."""
        with self.engine.connect() as conn:
            return served_counts(conn)

    def stale_processes(self, limit: int = 100) -> list[ServedProcess]:
        with self.engine.connect() as conn:
            return stale_processes(conn, limit)

    def list_live(self) -> list[dict]:
        """Every live prompt: name, version, config_hash, updated_at."""
        with self.engine.connect() as conn:
            return list_live(conn)
