"""Runs (``prompt_run``): one update's evaluation on one dataset. Its state machine, the
materialize lease (claim, page cursor, finish) and the finalizer's choice of the runs
that are done."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from sqlalchemy import BigInteger, Float, Integer, String, Text, bindparam, func, insert, select, update
from sqlalchemy.engine import Connection

from gate.errors import IllegalTransition, NotFound
from gate.records import Dataset, DatasetVersion, Run, RunCandidate
from gate.records.metrics import RunFigures
from gate.records.pinned import Pinned
from gate.states import RUN_OPEN, RUN_TERMINAL, RunStatus, Verdict, run_sources
from gate.verdict.reasons import without_legacy_items

from .dialect import db_now
from .schema import EPOCH, dataset_version, new_token, prompt, prompt_run, prompt_run_item, prompt_update

CANDIDATE, BASELINE = "candidate", "baseline"  # prompt_run.role
BASELINE_LOOKBACK = 20  # the latest baseline runs of a prompt on a version looked at for one to reuse


def _one(result, what: str):
    row = result.first()
    if row is None:
        raise NotFound(what)
    return row


def _run(row) -> Run:
    return Run(
        row.id,
        row.update_id,
        row.dataset_id,
        row.dataset_name,
        row.source_uri,
        row.source_options or {},
        row.status,
        row.min_accuracy,
        row.row_count,
        row.content_hash,
        row.source_version,
        row.materialize_cursor,
        row.materialized_at,
        row.lease_token,
        row.attempt,
        row.metrics,
        without_legacy_items(row.reason),  # one written before reasons named no item: cut
        row.created_at,
        row.started_at,
        row.finished_at,
        row.dataset_version_id,
        Pinned.of(row.pinned),
        row.role or CANDIDATE,
        row._mapping.get("dataset_version_number"),
        row.stopped,
    )


def insert_run(
    conn: Connection,
    update_id: int,
    ds: Dataset,
    min_accuracy: Decimal,
    version: DatasetVersion,
    pinned: dict,
    *,
    baseline_of: tuple[dict, dict | None] | None = None,
    baseline_run_id: int | None = None,
) -> int:
    """A PENDING run of the update over the dataset's ``version`` (pinned: a later import
    does not change what this run reads), with its bar and what its verdict stands on.
    ``baseline_of`` (config, provider): a baseline run, evaluating the live version's
    config and provider instead of the update's candidate. ``baseline_run_id``: the run a
    candidate run is compared with (kept from prune while this run's update is open)."""
    role = {"role": BASELINE, "config": baseline_of[0], "provider": baseline_of[1]} if baseline_of else {}
    result = conn.execute(
        insert(prompt_run).values(
            update_id=update_id,
            dataset_id=ds.id,
            dataset_name=ds.name,
            source_uri=version.source_uri,
            source_options=version.source_options,
            status=RunStatus.PENDING,
            min_accuracy=min_accuracy,
            row_count=0,
            content_hash=version.content_hash,
            source_version=version.source_version,
            dataset_version_id=version.id,
            pinned=pinned,
            lease_until=EPOCH,
            attempt=0,
            created_at=db_now(),
            baseline_run_id=baseline_run_id,
            **role,
        )
    )
    key = result.inserted_primary_key
    assert key is not None  # an INSERT of one row
    return key[0]


def set_run_metrics(conn: Connection, run_id: int, metrics: dict) -> int:
    """Reconcile adds the comparison to a finished run's metrics (only reconcile, holding
    the update's lock, writes a terminal run)."""
    return conn.execute(
        update(prompt_run)
        .where(prompt_run.c.id == run_id, prompt_run.c.status.in_(sorted(RUN_TERMINAL)))
        .values(metrics=metrics)
    ).rowcount


def baseline_run(
    conn: Connection,
    prompt_name: str,
    dataset_id: int,
    version_id: int,
    live_config_hash: str,
    live_provider: tuple[bool, dict | None] = (False, None),
    judged: Callable[[Pinned], bool] | None = None,
) -> Run | None:
    """The live version's finished answers on this dataset version: the run of the update
    that applied it (its answers on exactly these rows), else the latest finished baseline
    run an earlier update staged for the same live config on this version — on the same
    provider when the live version has one pinned (``live_provider``: pinned, declaration)
    — or None. ``judged``: a graded comparison's, whether a run's answers were graded as
    the candidate's are (the same judge version, pass labels and trials)."""
    applied = select(prompt.c.applied_update_id).where(prompt.c.name == prompt_name).scalar_subquery()
    on_version = [
        prompt_run.c.dataset_id == dataset_id,
        prompt_run.c.dataset_version_id == version_id,
        prompt_run.c.status == RunStatus.DONE,
        prompt_run.c.stopped.is_(None),
    ]  # a stopped run is partial
    row = conn.execute(
        select(prompt_run)
        .where(prompt_run.c.update_id == applied, _role_is(CANDIDATE), *on_version)
        .order_by(prompt_run.c.id.desc())
        .limit(1)
    ).first()
    if row is not None and judged is not None and not judged(Pinned.of(row.pinned)):
        row = None  # graded by another judge: its verdicts are not the ones compared
    if row is None:
        staged = conn.execute(
            select(prompt_run)
            .join(prompt_update, prompt_update.c.id == prompt_run.c.update_id)
            .where(prompt_update.c.prompt_name == prompt_name, _role_is(BASELINE), *on_version)
            .order_by(prompt_run.c.id.desc())
            .limit(BASELINE_LOOKBACK)
        ).all()
        pinned, provider = live_provider
        row = next(
            (
                r
                for r in staged
                if Pinned.of(r.pinned).config_hash == live_config_hash
                and (not pinned or r.provider == provider)
                and (judged is None or judged(Pinned.of(r.pinned)))
            ),
            None,
        )
    return _run(row) if row is not None and _whole(conn, row) else None


def _whole(conn: Connection, row) -> bool:
    """The run still holds every item (prune has not begun on it), its row locked so that
    prune (``store.retention.lock_prunable_run``) cannot begin now."""
    conn.execute(select(prompt_run.c.id).where(prompt_run.c.id == row.id).with_for_update())
    kept = conn.execute(select(func.count()).where(prompt_run_item.c.run_id == row.id)).scalar()
    return kept == RunFigures.of(row.metrics).total


def runs_of_update(conn: Connection, update_id: int, role: str = CANDIDATE) -> list[Run]:
    """The update's runs of ``role``: its candidate's (what the verdict is on), or the
    baseline runs scoring the live version for the comparison."""
    v = dataset_version
    number = select(v.c.number).where(v.c.id == prompt_run.c.dataset_version_id).scalar_subquery()
    return [
        _run(r)
        for r in conn.execute(
            select(prompt_run, number.label("dataset_version_number"))
            .where(prompt_run.c.update_id == update_id, _role_is(role))
            .order_by(prompt_run.c.id)
        )
    ]


def _role_is(role: str):
    # rows from before migration 6 read 'candidate' through the column's default
    return prompt_run.c.role == role


def get_run(conn: Connection, run_id: int) -> Run:
    return _run(_one(conn.execute(select(prompt_run).where(prompt_run.c.id == run_id)), f"unknown run {run_id}"))


def transition_run(
    conn: Connection,
    run_id: int,
    to: RunStatus,
    *,
    reason: str | None = None,
    metrics: dict | None = None,
    token: str | None = None,
) -> None:
    """One guarded UPDATE; with ``token``, also guarded by the caller's live lease."""
    sources = run_sources(to)
    values: dict[str, Any] = {"status": to}
    if reason is not None:
        values["reason"] = reason
    if metrics is not None:
        values["metrics"] = metrics
    if to == RunStatus.RUNNING:
        values["started_at"] = db_now()
    else:
        values.update(finished_at=db_now(), lease_token=None)
    where = [prompt_run.c.id == run_id, prompt_run.c.status.in_(list(sources))]
    if token is not None:
        where += [prompt_run.c.lease_token == token, prompt_run.c.lease_until > db_now()]
    if conn.execute(update(prompt_run).where(*where).values(**values)).rowcount != 1:
        now = conn.execute(select(prompt_run.c.status).where(prompt_run.c.id == run_id)).scalar()
        raise IllegalTransition(
            f"run {run_id} cannot move to {to}: it is {now or 'missing'}" + (" or its lease was lost" if token else "")
        )


def materialize_claim_query(status: RunStatus, limit: int):
    """Runs of one status that still need pages and whose lease is free. One status at
    a time keeps the (status, materialized_at, lease_until) index range in lease order:
    no filesort."""
    return (
        select(prompt_run.c.id)
        .where(
            prompt_run.c.status == status, prompt_run.c.materialized_at.is_(None), prompt_run.c.lease_until <= db_now()
        )
        .order_by(prompt_run.c.lease_until)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )


def claim_materialize(conn: Connection, lease_seconds: float, limit: int = 1) -> list[tuple[Run, str]]:
    """Lease runs that still need pages: RUNNING ones first (finish what was started),
    then PENDING ones."""
    ids: list[int] = []
    for status in (RunStatus.RUNNING, RunStatus.PENDING):
        ids += conn.execute(materialize_claim_query(status, limit - len(ids))).scalars()
        if len(ids) >= limit:
            break
    if not ids:
        return []
    token = new_token()
    conn.execute(
        update(prompt_run)
        .where(prompt_run.c.id.in_(ids))
        .values(lease_token=token, lease_until=db_now(lease_seconds), attempt=prompt_run.c.attempt + 1)
    )
    return [(_run(r), token) for r in conn.execute(select(prompt_run).where(prompt_run.c.id.in_(ids)))]


def advance_materialize(
    conn: Connection, run_id: int, token: str, *, cursor: str | None, added_rows: int, lease_seconds: float
) -> bool:
    """Move the cursor past a page (the caller inserts the page's items in the same
    transaction), renewing the lease. False when the lease was lost, or the run was
    stopped (its update settled early, or reached its spend cap): roll back."""
    return (
        conn.execute(
            _ADVANCE_MATERIALIZE,
            {
                "run_id": run_id,
                "token": token,
                "cursor": cursor,
                "added_rows": added_rows,
                "lease_seconds": lease_seconds,
            },
        ).rowcount
        == 1
    )


def _advance_materialize_statement():
    """Built once with bound parameters: building it per page was a tenth of the page's
    whole client work (see bench/README.md)."""
    r = prompt_run
    return (
        update(r)
        .where(
            r.c.id == bindparam("run_id", type_=BigInteger),
            r.c.lease_token == bindparam("token", type_=String),
            r.c.lease_until > db_now(),
            r.c.status.in_(sorted(RUN_OPEN)),
            r.c.stopped.is_(None),
        )
        .values(
            materialize_cursor=bindparam("cursor", type_=Text),
            row_count=r.c.row_count + bindparam("added_rows", type_=Integer),
            lease_until=db_now(bindparam("lease_seconds", type_=Float)),
        )
    )


_ADVANCE_MATERIALIZE = _advance_materialize_statement()


def page_committed(conn: Connection, run_id: int, cursor: str | None) -> bool:
    """Whether the page that moved the run's cursor to ``cursor`` (None: the last page) has
    committed. Pages commit in order and cursors only move forward, so this tells a second
    run of a page's transaction, after a COMMIT lost in flight, whether the first one
    committed (then the page must not be inserted again)."""
    r = prompt_run
    row = conn.execute(select(r.c.materialize_cursor, r.c.materialized_at).where(r.c.id == run_id)).first()
    if row is None:
        return False
    return row.materialized_at is not None if cursor is None else row.materialize_cursor == cursor


def finish_materialize(conn: Connection, run_id: int, token: str) -> bool:
    """Mark the last page in and release the lease (also: a stopped run's pages end here,
    its remaining rows never copied)."""
    return (
        conn.execute(
            update(prompt_run)
            .where(
                prompt_run.c.id == run_id,
                prompt_run.c.lease_token == token,
                prompt_run.c.lease_until > db_now(),
                prompt_run.c.status == RunStatus.RUNNING,
            )
            .values(materialized_at=db_now(), lease_token=None, lease_until=EPOCH)
        ).rowcount
        == 1
    )


def release_run_lease(conn: Connection, run_id: int, token: str) -> bool:
    return (
        conn.execute(
            update(prompt_run)
            .where(prompt_run.c.id == run_id, prompt_run.c.lease_token == token)
            .values(lease_token=None, lease_until=EPOCH)
        ).rowcount
        == 1
    )


def candidate_of_run(conn: Connection, run_id: int) -> RunCandidate:
    """What a run evaluates: its update's prompt, candidate config, pinned provider, whether
    it may reuse answers, and its dataset version. A baseline run evaluates the live
    config and provider pinned in it, and always reuses answers already paid for."""
    row = _one(
        conn.execute(
            select(
                prompt_update.c.prompt_name,
                prompt_update.c.candidate_config,
                prompt_update.c.provider,
                prompt_update.c.id,
                prompt_update.c.reuse,
                prompt_run.c.dataset_version_id,
                prompt_run.c.role,
                prompt_run.c.config.label("run_config"),
                prompt_run.c.provider.label("run_provider"),
            )
            .join(prompt_run, prompt_run.c.update_id == prompt_update.c.id)
            .where(prompt_run.c.id == run_id)
        ),
        f"unknown run {run_id}",
    )
    if row.role == BASELINE:
        return RunCandidate(row.prompt_name, row.run_config, row.run_provider, row.id, True, row.dataset_version_id)
    return RunCandidate(
        row.prompt_name, row.candidate_config, row.provider, row.id, bool(row.reuse), row.dataset_version_id
    )


def running_runs(conn: Connection) -> list[int]:
    """Ids of RUNNING runs: the execute worker rotates over them so no update starves."""
    return list(
        conn.execute(
            select(prompt_run.c.id).where(prompt_run.c.status == RunStatus.RUNNING).order_by(prompt_run.c.id)
        ).scalars()
    )


def finalize_candidates_query(limit: int):
    """RUNNING runs with every page in and no item left to score (the NOT EXISTS probes
    the item index), oldest first in (status, materialized_at) index order.

    Deliberately not a locking read: SKIP LOCKED would apply to the subquery too, and an
    item row locked by a claim in progress would be skipped as if it were not PENDING, so
    a run could be finalized with items still unscored. The run rows are locked one by
    one afterwards (``lock_run_for_finalize``) and the condition checked again."""
    unscored = pending_items().where(prompt_run_item.c.run_id == prompt_run.c.id).exists()
    return (
        select(prompt_run.c.id)
        .where(prompt_run.c.status == RunStatus.RUNNING, prompt_run.c.materialized_at.is_not(None), ~unscored)
        .order_by(prompt_run.c.materialized_at)
        .limit(limit)
    )


def lock_run_query(run_id: int):
    """The run row, still RUNNING, locked for this transaction unless another holds it."""
    return (
        select(prompt_run.c.id)
        .where(prompt_run.c.id == run_id, prompt_run.c.status == RunStatus.RUNNING)
        .with_for_update(skip_locked=True)
    )


def pending_items():
    """A run's PENDING items (add the run's condition), read on the ready index. Left to
    itself the optimizer may take the primary key for "is any item PENDING": a scan of the
    run's items in position order, past every one scored so far, on each probe (EXPLAIN
    in a 1,000,000-item run: 499,593 rows; bench/README.md, P10)."""
    i = prompt_run_item
    return (
        select(i.c.position)
        .where(i.c.verdict == Verdict.PENDING)
        .with_hint(i, "FORCE INDEX (ix_item_ready)", "mysql")
        .with_hint(i, "INDEXED BY ix_item_ready", "sqlite")
    )


def run_has_unscored_items(conn: Connection, run_id: int) -> bool:
    """A plain read: a PENDING item is PENDING in every committed version until its
    write-back commits, so this cannot miss one (unlike a SKIP LOCKED read)."""
    return conn.execute(pending_items().where(prompt_run_item.c.run_id == run_id).limit(1)).first() is not None


def finalizable_runs(conn: Connection, limit: int) -> list[int]:
    """Runs to finalize in this transaction: candidates, each locked (SKIP LOCKED: another
    finalizer takes it) and checked again under the lock."""
    ready = []
    candidates: Sequence[int] = conn.execute(finalize_candidates_query(limit)).scalars().all()
    for run_id in candidates:
        if conn.execute(lock_run_query(run_id)).first() is not None and not run_has_unscored_items(conn, run_id):
            ready.append(run_id)
    return ready
