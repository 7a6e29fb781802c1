"""Per-prompt lock rows (``prompt_lock``): the submissions of one prompt serialize on its row,
so latest wins however close together they come (``Gate.submit``)."""

from __future__ import annotations

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from .schema import prompt_lock


def ensure_prompt_lock(conn: Connection, prompt_name: str) -> None:
    """The prompt's lock row, inserted unless it exists. Run in a transaction of its own
    before the one that locks it: two first submissions of a prompt inserting the row in
    the transactions that then lock it would wait on each other's insert."""
    conn.execute(
        insert(prompt_lock)
        .values(prompt_name=prompt_name)
        .prefix_with("IGNORE", dialect="mysql")
        .prefix_with("OR IGNORE", dialect="sqlite")
    )


def lock_prompt(conn: Connection, prompt_name: str) -> bool:
    """Hold the prompt's lock row until the caller's transaction ends (FOR UPDATE; SQLite's
    BEGIN IMMEDIATE serializes writers already). False when the row does not exist."""
    return (
        conn.execute(
            select(prompt_lock.c.prompt_name).where(prompt_lock.c.prompt_name == prompt_name).with_for_update()
        ).first()
        is not None
    )
