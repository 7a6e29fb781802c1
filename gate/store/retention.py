"""Retention (``promptgate prune``): what may go once it is older than a cutoff, deleted in
bounded batches, each batch on an index. Never what backs a prompt's live version (the
runs, items and answers of the update that applied it), nor the runs an open update still
reads (its own, and the baselines they are compared with), nor a dataset version that is
current or pinned by an open run; update and run rows (the summaries) always stay."""

from __future__ import annotations

from typing import cast

from sqlalchemy import delete, exists, func, select, update
from sqlalchemy.engine import Connection

from gate.states import RUN_OPEN, RUN_TERMINAL, UPDATE_OPEN

from .dialect import db_now
from .schema import answer, dataset, dataset_version, prompt, prompt_run, prompt_run_item, prompt_update
from .versions import DELETING, IMPORTING, READY, lock_dataset


def _live_updates():
    """The updates that applied the live versions: their evidence stays."""
    return select(prompt.c.applied_update_id).where(prompt.c.applied_update_id.is_not(None))


def _open_evidence():
    """Runs an open update still reads: its own (a finished run of an update still
    evaluating) and the baselines its runs are compared with at reconcile."""
    r, u = prompt_run.alias("r"), prompt_update
    open_updates = select(u.c.id).where(u.c.status.in_(sorted(UPDATE_OPEN)))
    return (
        select(r.c.id)
        .where(r.c.update_id.in_(open_updates))
        .union(select(r.c.baseline_run_id).where(r.c.update_id.in_(open_updates), r.c.baseline_run_id.is_not(None)))
    )


def prunable_runs(conn: Connection, older_than: float, limit: int) -> list[int]:
    """Finished runs, finished more than ``older_than`` seconds ago, that still have items
    and are not evidence of a live version."""
    r, i = prompt_run, prompt_run_item
    has_items = exists().where(i.c.run_id == r.c.id)
    return list(
        conn.execute(
            select(r.c.id)
            .where(
                r.c.status.in_(sorted(RUN_TERMINAL)),
                r.c.finished_at <= db_now(-older_than),
                r.c.update_id.not_in(_live_updates()),
                r.c.id.not_in(_open_evidence()),
                has_items,
            )
            .order_by(r.c.id)
            .limit(limit)
        ).scalars()
    )


def lock_prunable_run(conn: Connection, run_id: int) -> bool:
    """Lock the run's row if its items may still go (no open update reads it since the
    list was made): a submission pinning it as a baseline locks the same row first
    (``store.runs.baseline_run``), so the two never cross."""
    r = prompt_run
    return (
        conn.execute(
            select(r.c.id)
            .where(r.c.id == run_id, r.c.update_id.not_in(_live_updates()), r.c.id.not_in(_open_evidence()))
            .with_for_update()
        ).first()
        is not None
    )


def count_run_items(conn: Connection, run_ids: list[int]) -> int:
    if not run_ids:
        return 0
    count = conn.execute(select(func.count()).where(prompt_run_item.c.run_id.in_(run_ids))).scalar()
    assert count is not None  # COUNT without GROUP BY: always one row
    return count


def delete_run_items(conn: Connection, run_id: int, limit: int) -> int:
    """Up to ``limit`` items of a run, lowest positions first, on its (run_id, position)
    index: the batch's last position is read, then everything up to it deleted."""
    i = prompt_run_item
    last = conn.execute(
        select(i.c.position).where(i.c.run_id == run_id).order_by(i.c.position).offset(limit - 1).limit(1)
    ).scalar()
    where = [i.c.run_id == run_id] + ([i.c.position <= last] if last is not None else [])
    return conn.execute(delete(i).where(*where)).rowcount


STALE_IMPORT_SECONDS = 86400  # an import still IMPORTING after a day was killed: its rows are litter


def _version_prunable(older_than: float):
    """A version prune may take: READY and made more than ``older_than`` seconds ago (or an
    import left IMPORTING for over a day, whatever the cutoff), not current, and not read by
    any run that is open, backs a live version or still has its items (whose inputs are the
    version's rows) and is not itself old enough to be pruned. Checked again, under the
    dataset's lock, when prune takes it."""
    v, r, i = dataset_version, prompt_run, prompt_run_item
    current = select(dataset.c.current_version_id).where(dataset.c.current_version_id.is_not(None))
    pruned_too = r.c.status.in_(sorted(RUN_TERMINAL)) & (r.c.finished_at <= db_now(-older_than))
    reader = exists().where(
        r.c.dataset_version_id == v.c.id,
        r.c.status.in_(sorted(RUN_OPEN))
        | r.c.update_id.in_(_live_updates())
        | (exists().where(i.c.run_id == r.c.id) & ~pruned_too),
    )
    old_enough = ((v.c.status == READY) & (v.c.created_at <= db_now(-older_than))) | (
        (v.c.status == IMPORTING) & (v.c.created_at <= db_now(-max(older_than, STALE_IMPORT_SECONDS)))
    )
    return old_enough & v.c.id.not_in(current) & ~reader


def prunable_versions(conn: Connection, older_than: float) -> list[tuple[int, int, int]]:
    """(version id, dataset id, rows) of the versions prune may take, oldest first."""
    v = dataset_version
    rows = conn.execute(
        select(v.c.id, v.c.dataset_id, v.c.row_count).where(_version_prunable(older_than)).order_by(v.c.id)
    )
    return cast("list[tuple[int, int, int]]", [tuple(row) for row in rows])  # the columns' types


def take_version(conn: Connection, version_id: int, dataset_id: int, older_than: float) -> bool:
    """READY (or stale IMPORTING) → DELETING, if the version is still prunable, under an
    exclusive lock of its dataset's row: a refresh cannot make it current, nor a submission
    pin it, in between. False: it is needed again (or gone); leave it."""
    lock_dataset(conn, dataset_id)
    v = dataset_version
    return (
        conn.execute(
            update(v).where(v.c.id == version_id, _version_prunable(older_than)).values(status=DELETING)
        ).rowcount
        == 1
    )


def _prunable_answers(older_than: float):
    """Answers kept more than ``older_than`` seconds that no live version paid for or
    reused (a live prompt re-run unchanged costs nothing, however old its answers). An
    item with trials names trial 1's key; the other trials' answers name it (``trial_of``)."""
    i, r = prompt_run_item, prompt_run
    live_keys = (
        select(i.c.answer_key)
        .join(r, r.c.id == i.c.run_id)
        .where(r.c.update_id.in_(_live_updates()), i.c.answer_key.is_not(None))
    )
    return (
        (answer.c.created_at <= db_now(-older_than))
        & answer.c.update_id.not_in(_live_updates())
        & answer.c.request_key.not_in(live_keys)
        & (answer.c.trial_of.is_(None) | answer.c.trial_of.not_in(live_keys))
    )


def prunable_answer_keys(conn: Connection, older_than: float, limit: int) -> list[str]:
    """The first ``limit`` prunable answers, oldest first (the ``created_at`` index)."""
    return list(
        conn.execute(
            select(answer.c.request_key).where(_prunable_answers(older_than)).order_by(answer.c.created_at).limit(limit)
        ).scalars()
    )


def count_prunable_answers(conn: Connection, older_than: float) -> int:
    return conn.execute(select(func.count()).select_from(answer).where(_prunable_answers(older_than))).scalar_one()


def delete_answers(conn: Connection, keys: list[str]) -> int:
    if not keys:
        return 0
    return conn.execute(delete(answer).where(answer.c.request_key.in_(keys))).rowcount
