"""Retention (``promptgate prune``): what may go once it is older than a cutoff, deleted in
bounded batches, each batch on an index. Never what backs a prompt's live version (the
runs, items and answers of the update that applied it), nor a dataset version that is
current or pinned by an open run; update and run rows (the summaries) always stay."""

from __future__ import annotations

from sqlalchemy import delete, exists, func, select
from sqlalchemy.engine import Connection

from ..states import RUN_OPEN, RUN_TERMINAL
from .dialect import db_now
from .schema import answer, dataset, dataset_version, prompt, prompt_run, prompt_run_item


def _live_updates():
    """The updates that applied the live versions: their evidence stays."""
    return select(prompt.c.applied_update_id).where(prompt.c.applied_update_id.is_not(None))


def prunable_runs(conn: Connection, older_than: float, limit: int) -> list[int]:
    """Finished runs, finished more than ``older_than`` seconds ago, that still have items
    and are not evidence of a live version."""
    r, i = prompt_run, prompt_run_item
    has_items = exists().where(i.c.run_id == r.c.id)
    return list(conn.execute(select(r.c.id).where(r.c.status.in_(sorted(RUN_TERMINAL)),
                                                  r.c.finished_at <= db_now(-older_than),
                                                  r.c.update_id.not_in(_live_updates()), has_items)
                             .order_by(r.c.id).limit(limit)).scalars())


def count_run_items(conn: Connection, run_ids: list[int]) -> int:
    if not run_ids:
        return 0
    return conn.execute(select(func.count()).where(prompt_run_item.c.run_id.in_(run_ids))).scalar()


def delete_run_items(conn: Connection, run_id: int, limit: int) -> int:
    """Up to ``limit`` items of a run, lowest positions first, on its (run_id, position)
    index: the batch's last position is read, then everything up to it deleted."""
    i = prompt_run_item
    last = conn.execute(select(i.c.position).where(i.c.run_id == run_id).order_by(i.c.position)
                        .offset(limit - 1).limit(1)).scalar()
    where = [i.c.run_id == run_id] + ([i.c.position <= last] if last is not None else [])
    return conn.execute(delete(i).where(*where)).rowcount


def prunable_versions(conn: Connection, older_than: float) -> list[tuple[int, int]]:
    """(version id, rows) of versions made more than ``older_than`` seconds ago that are not
    current, not pinned by an open run and not read by a live version's runs."""
    v, r = dataset_version, prompt_run
    current = select(dataset.c.current_version_id).where(dataset.c.current_version_id.is_not(None))
    pinned = select(r.c.dataset_version_id).where(r.c.dataset_version_id.is_not(None),
                                                   (r.c.status.in_(sorted(RUN_OPEN))) |
                                                   r.c.update_id.in_(_live_updates()))
    return [tuple(row) for row in conn.execute(
        select(v.c.id, v.c.row_count).where(v.c.created_at <= db_now(-older_than), v.c.id.not_in(current),
                                            v.c.id.not_in(pinned)).order_by(v.c.id))]


def _prunable_answers(older_than: float):
    """Answers kept more than ``older_than`` seconds that no live version paid for."""
    return (answer.c.created_at <= db_now(-older_than)) & answer.c.update_id.not_in(_live_updates())


def prunable_answer_keys(conn: Connection, older_than: float, limit: int) -> list[str]:
    """The first ``limit`` prunable answers, oldest first (the ``created_at`` index)."""
    return list(conn.execute(select(answer.c.request_key).where(_prunable_answers(older_than))
                             .order_by(answer.c.created_at).limit(limit)).scalars())


def count_prunable_answers(conn: Connection, older_than: float) -> int:
    return conn.execute(select(func.count()).select_from(answer).where(_prunable_answers(older_than))).scalar_one()


def delete_answers(conn: Connection, keys: list[str]) -> int:
    if not keys:
        return 0
    return conn.execute(delete(answer).where(answer.c.request_key.in_(keys))).rowcount
