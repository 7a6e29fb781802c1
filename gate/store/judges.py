"""Judges and judged runs: a live version as a judge is pinned with it (its config, the
update whose runs evaluated it, its provider), and a judged run's figures beyond its
verdicts (the judge's and the live version's calls and tokens, summed from the items'
``judge`` column once, by finalize)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Integer, case, cast, func, select
from sqlalchemy.engine import Connection

from gate.states import Verdict

from .dialect import json_text
from .schema import prompt_run_item, prompt_version

# what an item's judge column counts (workers.execute.judging writes it)
ROLE_KEYS = {
    "judge": ("judge_calls", "judge_in", "judge_out"),
    "live": ("live_calls", "live_in", "live_out"),
}


def version_record(conn: Connection, name: str, version: int) -> dict[str, Any] | None:
    """Version ``version`` of a prompt as the history keeps it: config, config hash, the
    update that made it live (a rollback's: the restored version's), its provider
    declaration and whether one is on record; None when there is no such version."""
    v = prompt_version
    row = conn.execute(
        select(
            v.c.config,
            v.c.config_hash,
            v.c.update_id,
            v.c.kind,
            v.c.restored_version,
            v.c.provider,
            v.c.provider_pinned,
        ).where(v.c.prompt_name == name, v.c.version == version)
    ).first()
    if row is None:
        return None
    update_id = row.update_id
    if row.kind == "rollback" and row.restored_version is not None:
        restored = conn.execute(
            select(v.c.update_id).where(v.c.prompt_name == name, v.c.version == row.restored_version)
        ).scalar()
        update_id = restored
    return {
        "config": row.config,
        "config_hash": row.config_hash,
        "update_id": update_id,
        "provider": row.provider,
        "provider_pinned": bool(row.provider_pinned),
    }


def judged_calls(conn: Connection, run_id: int) -> dict[str, dict[str, int]]:
    """Per role (judge; live, a comparison's), the calls made and the tokens of the answers
    used over the run's answered items, and the answers without token counts."""
    i = prompt_run_item
    answered = [i.c.run_id == run_id, i.c.verdict.in_([Verdict.MATCH, Verdict.MISMATCH]), i.c.judge.is_not(None)]
    columns = []
    for calls, tokens_in, tokens_out in ROLE_KEYS.values():
        number_in, number_out = (cast(json_text(i.c.judge, k), BigInteger) for k in (tokens_in, tokens_out))
        unmetered = case((number_in.is_(None) | number_out.is_(None), 1), else_=0)
        used = cast(json_text(i.c.judge, calls.replace("calls", "answers")), Integer)
        columns += [
            func.coalesce(func.sum(cast(json_text(i.c.judge, calls), Integer)), 0),
            func.coalesce(func.sum(number_in), 0),
            func.coalesce(func.sum(number_out), 0),
            func.coalesce(func.sum(case((used > 0, unmetered), else_=0)), 0),
        ]
    row = conn.execute(select(*columns).where(*answered)).one()
    out: dict[str, dict[str, int]] = {}
    for k, role in enumerate(ROLE_KEYS):
        made, prompt_tokens, completion_tokens, without_counts = (int(x) for x in row[4 * k : 4 * k + 4])
        out[role] = {
            "calls": made,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "unmetered": without_counts,
        }
    return out
