"""Every SQL statement of prompt-gate. Workers, the service and the CLI call these
functions; none of them builds SQL.

Conventions: a function takes an open ``Connection`` inside the caller's transaction
(the caller owns commit boundaries), every state change is one conditional UPDATE whose
row count is checked, and every write-back of leased work is guarded by the lease token
and ``lease_until > now``. Time is ``db_now()``: the database server's UTC clock.
"""

from __future__ import annotations

import json
import secrets
from decimal import Decimal
from typing import Any, Sequence

from sqlalchemy import (BigInteger, Column, DateTime, Float, Integer, MetaData, String, Table, Text, bindparam,
                        case, delete, exists, func, insert, literal, select, update)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.types import TypeDecorator

from .db import db_now
from .errors import IllegalTransition, NotFound
from .models import (ClaimedItem, Dataset, ItemResult, ItemSample, LivePrompt, Mapping, Run, RunCounts,
                     Update, WorkerRow)
from .states import (RUN_OPEN, UPDATE_OPEN, RunStatus, UpdateStatus, Verdict, run_sources,
                     update_sources)


class JsonText(TypeDecorator):
    impl = Text
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    def process_result_value(self, value, dialect):
        return None if value is None else json.loads(value)


class Bar(TypeDecorator):
    """An accuracy bar as an exact Decimal (DECIMAL on MySQL, text on SQLite)."""
    impl = String(32)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return None if value is None else str(Decimal(str(value)))

    def process_result_value(self, value, dialect):
        return None if value is None else Decimal(str(value)).normalize()


meta = MetaData()
T = DateTime()

prompt = Table("prompt", meta,
               Column("id", BigInteger, primary_key=True), Column("name", String(128)),
               Column("version", Integer), Column("config", JsonText), Column("config_hash", String(64)),
               Column("applied_update_id", BigInteger), Column("updated_at", T))
prompt_version = Table("prompt_version", meta,
                       Column("id", BigInteger, primary_key=True), Column("prompt_name", String(128)),
                       Column("version", Integer), Column("config", JsonText), Column("config_hash", String(64)),
                       Column("update_id", BigInteger), Column("applied_at", T))
dataset = Table("dataset", meta,
                Column("id", BigInteger, primary_key=True), Column("name", String(128)),
                Column("source_uri", Text), Column("options", JsonText), Column("created_at", T))
prompt_dataset = Table("prompt_dataset", meta,
                       Column("id", BigInteger, primary_key=True), Column("prompt_name", String(128)),
                       Column("dataset_id", BigInteger), Column("min_accuracy", Bar), Column("created_at", T))
prompt_update = Table("prompt_update", meta,
                      Column("id", BigInteger, primary_key=True), Column("prompt_name", String(128)),
                      Column("mode", String(8)), Column("status", String(16)),
                      Column("candidate_config", JsonText), Column("candidate_hash", String(64)),
                      Column("base_version", Integer), Column("source", JsonText),
                      Column("source_key", String(255)), Column("source_sha", String(64)),
                      Column("reason", Text), Column("created_at", T), Column("started_at", T),
                      Column("finished_at", T))
prompt_run = Table("prompt_run", meta,
                   Column("id", BigInteger, primary_key=True), Column("update_id", BigInteger),
                   Column("dataset_id", BigInteger), Column("dataset_name", String(128)),
                   Column("source_uri", Text), Column("source_options", JsonText),
                   Column("status", String(16)), Column("min_accuracy", Bar),
                   Column("row_count", Integer), Column("content_hash", String(64)),
                   Column("source_version", String(255)), Column("materialize_cursor", Text),
                   Column("materialized_at", T), Column("lease_token", String(32)), Column("lease_until", T),
                   Column("attempt", Integer), Column("metrics", JsonText), Column("reason", Text),
                   Column("created_at", T), Column("started_at", T), Column("finished_at", T))
prompt_run_item = Table("prompt_run_item", meta,
                        Column("id", BigInteger, primary_key=True), Column("run_id", BigInteger),
                        Column("item_id", String(191)), Column("input", JsonText),
                        Column("expected_decision", String(128)), Column("actual_decision", String(128)),
                        Column("raw_output", Text), Column("verdict", String(8)), Column("attempt", Integer),
                        Column("next_attempt_at", T), Column("lease_token", String(32)),
                        Column("lease_until", T), Column("latency_ms", Integer),
                        Column("prompt_tokens", Integer), Column("completion_tokens", Integer),
                        Column("error", Text))
worker = Table("worker", meta,
               Column("id", String(64), primary_key=True), Column("role", String(32)),
               Column("host", String(255)), Column("pid", Integer), Column("started_at", T),
               Column("heartbeat_at", T))

# A time far in the past: "visible now" for new items and released runs.
EPOCH = "2000-01-01 00:00:00"
RAW_OUTPUT_LIMIT = 4000


def new_token() -> str:
    return secrets.token_hex(16)


def _one(result, what: str):
    row = result.first()
    if row is None:
        raise NotFound(what)
    return row


def _epoch():
    from datetime import datetime
    return datetime(2000, 1, 1)


# --- datasets and bars ---------------------------------------------------------

def _dataset(row) -> Dataset:
    return Dataset(row.id, row.name, row.source_uri, row.options or {}, row.created_at)


def upsert_dataset(conn: Connection, name: str, source_uri: str, options: dict) -> tuple[Dataset, bool]:
    """Register a dataset, or point an existing one at a new source. Returns (dataset, created)."""
    existing = find_dataset(conn, name)
    if existing is None:
        try:
            conn.execute(insert(dataset).values(name=name, source_uri=source_uri, options=options,
                                                created_at=db_now()))
            return get_dataset(conn, name), True
        except IntegrityError:
            pass   # registered by someone else a moment ago: update it below
    conn.execute(update(dataset).where(dataset.c.name == name)
                 .values(source_uri=source_uri, options=options))
    return get_dataset(conn, name), False


def find_dataset(conn: Connection, name: str) -> Dataset | None:
    row = conn.execute(select(dataset).where(dataset.c.name == name)).first()
    return _dataset(row) if row else None


def get_dataset(conn: Connection, name: str) -> Dataset:
    found = find_dataset(conn, name)
    if found is None:
        raise NotFound(f"unknown dataset {name!r}: register it with `promptgate dataset add {name} --source URI`")
    return found


def list_datasets(conn: Connection) -> list[Dataset]:
    return [_dataset(r) for r in conn.execute(select(dataset).order_by(dataset.c.name))]


def list_mappings(conn: Connection, prompt_name: str | None = None) -> list[Mapping]:
    stmt = (select(prompt_dataset.c.prompt_name, prompt_dataset.c.dataset_id, dataset.c.name,
                   prompt_dataset.c.min_accuracy)
            .join(dataset, dataset.c.id == prompt_dataset.c.dataset_id)
            .order_by(prompt_dataset.c.prompt_name, dataset.c.name))
    if prompt_name is not None:
        stmt = stmt.where(prompt_dataset.c.prompt_name == prompt_name)
    return [Mapping(*row) for row in conn.execute(stmt)]


def upsert_mapping(conn: Connection, prompt_name: str, dataset_id: int, min_accuracy: Decimal) -> bool:
    """Map a prompt to a dataset with a bar, or change the bar. Returns True when created."""
    changed = conn.execute(update(prompt_dataset)
                           .where(prompt_dataset.c.prompt_name == prompt_name,
                                  prompt_dataset.c.dataset_id == dataset_id)
                           .values(min_accuracy=min_accuracy)).rowcount
    if changed:
        return False
    conn.execute(insert(prompt_dataset).values(prompt_name=prompt_name, dataset_id=dataset_id,
                                               min_accuracy=min_accuracy, created_at=db_now()))
    return True


def delete_mapping(conn: Connection, prompt_name: str, dataset_id: int) -> bool:
    return conn.execute(delete(prompt_dataset).where(prompt_dataset.c.prompt_name == prompt_name,
                                                     prompt_dataset.c.dataset_id == dataset_id)).rowcount > 0


# --- the live table ------------------------------------------------------------

def find_live(conn: Connection, name: str) -> LivePrompt | None:
    row = conn.execute(select(prompt).where(prompt.c.name == name)).first()
    if row is None:
        return None
    return LivePrompt(row.name, row.version, row.config, row.config_hash, row.applied_update_id, row.updated_at)


def live_version(conn: Connection, name: str) -> int:
    return conn.execute(select(prompt.c.version).where(prompt.c.name == name)).scalar() or 0


def write_live(conn: Connection, upd: Update) -> bool:
    """Apply an update's candidate to the live table, guarded by ``version = base_version``,
    and record the history row. False when the live row moved on since submit."""
    new_version = upd.base_version + 1
    if upd.base_version == 0:
        try:
            with conn.begin_nested():
                conn.execute(insert(prompt).values(name=upd.prompt_name, version=1, config=upd.candidate_config,
                                                   config_hash=upd.candidate_hash, applied_update_id=upd.id,
                                                   updated_at=db_now()))
        except IntegrityError:
            return False
    else:
        moved = conn.execute(update(prompt)
                             .where(prompt.c.name == upd.prompt_name, prompt.c.version == upd.base_version)
                             .values(version=new_version, config=upd.candidate_config,
                                     config_hash=upd.candidate_hash, applied_update_id=upd.id,
                                     updated_at=db_now())).rowcount
        if moved != 1:
            return False
    conn.execute(insert(prompt_version).values(prompt_name=upd.prompt_name, version=new_version,
                                               config=upd.candidate_config, config_hash=upd.candidate_hash,
                                               update_id=upd.id, applied_at=db_now()))
    return True


def prompt_history(conn: Connection, name: str) -> list[dict]:
    rows = conn.execute(select(prompt_version).where(prompt_version.c.prompt_name == name)
                        .order_by(prompt_version.c.version))
    return [dict(r._mapping) for r in rows]


# --- updates ---------------------------------------------------------------------

def _update(row) -> Update:
    return Update(row.id, row.prompt_name, row.mode, row.status, row.candidate_config, row.candidate_hash,
                  row.base_version, row.source or {}, row.reason, row.created_at, row.started_at,
                  row.finished_at)


def insert_update(conn: Connection, *, prompt_name: str, mode: str, config: dict, config_hash: str,
                  base_version: int, source: dict, source_key: str, source_sha: str | None) -> int:
    result = conn.execute(insert(prompt_update).values(
        prompt_name=prompt_name, mode=mode, status=UpdateStatus.PENDING, candidate_config=config,
        candidate_hash=config_hash, base_version=base_version, source=source, source_key=source_key,
        source_sha=source_sha, created_at=db_now()))
    return result.inserted_primary_key[0]


def insert_run(conn: Connection, update_id: int, ds: Dataset, min_accuracy: Decimal) -> int:
    result = conn.execute(insert(prompt_run).values(
        update_id=update_id, dataset_id=ds.id, dataset_name=ds.name, source_uri=ds.source_uri,
        source_options=ds.options, status=RunStatus.PENDING, min_accuracy=min_accuracy, row_count=0,
        lease_until=_epoch(), attempt=0, created_at=db_now()))
    return result.inserted_primary_key[0]


def find_update(conn: Connection, update_id: int) -> Update | None:
    row = conn.execute(select(prompt_update).where(prompt_update.c.id == update_id)).first()
    return _update(row) if row else None


def update_status(conn: Connection, update_id: int) -> str:
    """The status of one update: a primary-key read, what a waiting caller polls."""
    status = conn.execute(select(prompt_update.c.status).where(prompt_update.c.id == update_id)).scalar()
    if status is None:
        raise NotFound(f"unknown update {update_id}")
    return status


def get_update(conn: Connection, update_id: int) -> Update:
    found = find_update(conn, update_id)
    if found is None:
        raise NotFound(f"unknown update {update_id}")
    return found


def superseded_updates(conn: Connection, prompt_name: str, mode: str, source_key: str | None) -> list[int]:
    """Open updates that a new submission replaces (latest wins): every open apply-mode
    update of the prompt, or the open check-mode updates of the same source."""
    stmt = select(prompt_update.c.id).where(prompt_update.c.prompt_name == prompt_name,
                                            prompt_update.c.mode == mode,
                                            prompt_update.c.status.in_(list(UPDATE_OPEN)))
    if source_key is not None:
        stmt = stmt.where(prompt_update.c.source_key == source_key)
    return list(conn.execute(stmt.order_by(prompt_update.c.id).with_for_update()).scalars())


def transition_update(conn: Connection, update_id: int, to: UpdateStatus, reason: str | None = None) -> None:
    """One guarded UPDATE from the states the state machine allows; raises IllegalTransition
    (with the state found) when the update is not in one of them."""
    sources = update_sources(to)
    values: dict[str, Any] = {"status": to}
    if reason is not None:
        values["reason"] = reason
    if to == UpdateStatus.RUNNING:
        values["started_at"] = db_now()
    else:
        values["finished_at"] = db_now()
    moved = conn.execute(update(prompt_update)
                         .where(prompt_update.c.id == update_id, prompt_update.c.status.in_(list(sources)))
                         .values(**values)).rowcount
    if moved != 1:
        now = conn.execute(select(prompt_update.c.status).where(prompt_update.c.id == update_id)).scalar()
        raise IllegalTransition(f"update {update_id} cannot move to {to}: it is {now or 'missing'}")


def start_update(conn: Connection, update_id: int) -> bool:
    """PENDING → RUNNING if still PENDING; True when the update is (now) RUNNING."""
    try:
        transition_update(conn, update_id, UpdateStatus.RUNNING)
        return True
    except IllegalTransition:
        status = conn.execute(select(prompt_update.c.status).where(prompt_update.c.id == update_id)).scalar()
        return status == UpdateStatus.RUNNING


def cancel_update(conn: Connection, update_id: int, reason: str) -> None:
    """Cancel an open update and its open runs, in the caller's transaction."""
    transition_update(conn, update_id, UpdateStatus.CANCELLED, reason)
    conn.execute(update(prompt_run)
                 .where(prompt_run.c.update_id == update_id, prompt_run.c.status.in_(list(RUN_OPEN)))
                 .values(status=RunStatus.CANCELLED, reason=reason, finished_at=db_now(),
                         lease_token=None))


def updates_for_sha(conn: Connection, sha: str, prompt_name: str | None = None) -> list[Update]:
    stmt = select(prompt_update).where(prompt_update.c.source_sha == sha)
    if prompt_name:
        stmt = stmt.where(prompt_update.c.prompt_name == prompt_name)
    return [_update(r) for r in conn.execute(stmt.order_by(prompt_update.c.id))]


def list_updates(conn: Connection, limit: int = 20, prompt_name: str | None = None) -> list[Update]:
    stmt = select(prompt_update).order_by(prompt_update.c.id.desc()).limit(limit)
    if prompt_name:
        stmt = stmt.where(prompt_update.c.prompt_name == prompt_name)
    return [_update(r) for r in conn.execute(stmt)]


def any_open_update(conn: Connection) -> bool:
    """Is there work anywhere? One index probe on (status, id): what an idle fleet asks."""
    return conn.execute(select(prompt_update.c.id)
                        .where(prompt_update.c.status.in_([UpdateStatus.PENDING, UpdateStatus.RUNNING]))
                        .limit(1)).first() is not None


def reconcile_candidates_query(limit: int):
    """RUNNING updates none of whose runs is still open, on the (status, id) index; the
    NOT EXISTS probes (update_id, status). Not a locking read, for the reason
    ``finalize_candidates_query`` gives: each update is locked afterwards and checked again."""
    open_run = exists().where(prompt_run.c.update_id == prompt_update.c.id,
                              prompt_run.c.status.in_(list(RUN_OPEN)))
    return (select(prompt_update.c.id)
            .where(prompt_update.c.status == UpdateStatus.RUNNING, ~open_run)
            .order_by(prompt_update.c.id).limit(limit))


def lock_update_query(update_id: int):
    return (select(prompt_update.c.id)
            .where(prompt_update.c.id == update_id, prompt_update.c.status == UpdateStatus.RUNNING)
            .with_for_update(skip_locked=True))


def reconcilable_updates(conn: Connection, limit: int) -> list[int]:
    """Updates to reconcile in this transaction: candidates, each locked (SKIP LOCKED:
    another reconciler takes it) and checked again under the lock with a plain read."""
    ready = []
    for update_id in conn.execute(reconcile_candidates_query(limit)).scalars().all():
        if conn.execute(lock_update_query(update_id)).first() is None:
            continue
        if all(status not in RUN_OPEN for status in conn.execute(
                select(prompt_run.c.status).where(prompt_run.c.update_id == update_id)).scalars()):
            ready.append(update_id)
    return ready


# --- runs ---------------------------------------------------------------------------

def _run(row) -> Run:
    return Run(row.id, row.update_id, row.dataset_id, row.dataset_name, row.source_uri, row.source_options or {},
               row.status, row.min_accuracy, row.row_count, row.content_hash, row.source_version,
               row.materialize_cursor, row.materialized_at, row.lease_token, row.attempt, row.metrics,
               row.reason, row.created_at, row.started_at, row.finished_at)


def runs_of_update(conn: Connection, update_id: int) -> list[Run]:
    return [_run(r) for r in conn.execute(select(prompt_run).where(prompt_run.c.update_id == update_id)
                                          .order_by(prompt_run.c.id))]


def get_run(conn: Connection, run_id: int) -> Run:
    return _run(_one(conn.execute(select(prompt_run).where(prompt_run.c.id == run_id)), f"unknown run {run_id}"))


def transition_run(conn: Connection, run_id: int, to: RunStatus, *, reason: str | None = None,
                   metrics: dict | None = None, token: str | None = None) -> None:
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
        raise IllegalTransition(f"run {run_id} cannot move to {to}: it is {now or 'missing'}"
                                + (" or its lease was lost" if token else ""))


def materialize_claim_query(status: RunStatus, limit: int):
    """Runs of one status that still need pages and whose lease is free. One status at
    a time keeps the (status, materialized_at, lease_until) index range in lease order:
    no filesort."""
    return (select(prompt_run.c.id)
            .where(prompt_run.c.status == status, prompt_run.c.materialized_at.is_(None),
                   prompt_run.c.lease_until <= db_now())
            .order_by(prompt_run.c.lease_until).limit(limit)
            .with_for_update(skip_locked=True))


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
    conn.execute(update(prompt_run).where(prompt_run.c.id.in_(ids))
                 .values(lease_token=token, lease_until=db_now(lease_seconds), attempt=prompt_run.c.attempt + 1))
    return [(_run(r), token) for r in conn.execute(select(prompt_run).where(prompt_run.c.id.in_(ids)))]


def advance_materialize(conn: Connection, run_id: int, token: str, *, cursor: str | None, added_rows: int,
                        content_hash: str, source_version: str, lease_seconds: float) -> bool:
    """Move the cursor past a page (the caller inserts the page's items in the same
    transaction), renewing the lease. False when the lease was lost: roll back."""
    return conn.execute(_ADVANCE_MATERIALIZE, {
        "run_id": run_id, "token": token, "cursor": cursor, "added_rows": added_rows, "content_hash": content_hash,
        "source_version": source_version, "lease_seconds": lease_seconds}).rowcount == 1


def _advance_materialize_statement():
    """Built once with bound parameters: building it per page cost ~2 ms of CPU (measured),
    a tenth of the page's whole client work."""
    r = prompt_run
    return (update(r)
            .where(r.c.id == bindparam("run_id", type_=BigInteger), r.c.lease_token == bindparam("token", type_=String),
                   r.c.lease_until > db_now(), r.c.status.in_(sorted(RUN_OPEN)))
            .values(materialize_cursor=bindparam("cursor", type_=Text),
                    row_count=r.c.row_count + bindparam("added_rows", type_=Integer),
                    content_hash=bindparam("content_hash", type_=String),
                    source_version=bindparam("source_version", type_=Text),
                    lease_until=db_now(bindparam("lease_seconds", type_=Float))))


_ADVANCE_MATERIALIZE = _advance_materialize_statement()


def finish_materialize(conn: Connection, run_id: int, token: str) -> bool:
    """Mark the last page in and release the lease."""
    return conn.execute(update(prompt_run)
                        .where(prompt_run.c.id == run_id, prompt_run.c.lease_token == token,
                               prompt_run.c.lease_until > db_now(), prompt_run.c.status == RunStatus.RUNNING)
                        .values(materialized_at=db_now(), lease_token=None, lease_until=_epoch())).rowcount == 1


def release_run_lease(conn: Connection, run_id: int, token: str) -> bool:
    return conn.execute(update(prompt_run)
                        .where(prompt_run.c.id == run_id, prompt_run.c.lease_token == token)
                        .values(lease_token=None, lease_until=_epoch())).rowcount == 1


def candidate_config_of_run(conn: Connection, run_id: int) -> tuple[str, dict]:
    row = _one(conn.execute(select(prompt_update.c.prompt_name, prompt_update.c.candidate_config)
                            .join(prompt_run, prompt_run.c.update_id == prompt_update.c.id)
                            .where(prompt_run.c.id == run_id)), f"unknown run {run_id}")
    return row.prompt_name, row.candidate_config


def running_runs(conn: Connection) -> list[int]:
    """Ids of RUNNING runs: the execute worker rotates over them so no update starves."""
    return list(conn.execute(select(prompt_run.c.id).where(prompt_run.c.status == RunStatus.RUNNING)
                             .order_by(prompt_run.c.id)).scalars())


def finalize_candidates_query(limit: int):
    """RUNNING runs with every page in and no item left to score (the NOT EXISTS probes
    the item index), oldest first in (status, materialized_at) index order.

    Deliberately not a locking read: SKIP LOCKED would apply to the subquery too, and an
    item row locked by a claim in progress would be skipped as if it were not PENDING, so
    a run could be finalized with items still unscored. The run rows are locked one by
    one afterwards (``lock_run_for_finalize``) and the condition checked again."""
    unscored = exists().where(prompt_run_item.c.run_id == prompt_run.c.id,
                              prompt_run_item.c.verdict == Verdict.PENDING)
    return (select(prompt_run.c.id)
            .where(prompt_run.c.status == RunStatus.RUNNING, prompt_run.c.materialized_at.is_not(None),
                   ~unscored)
            .order_by(prompt_run.c.materialized_at).limit(limit))


def lock_run_query(run_id: int):
    """The run row, still RUNNING, locked for this transaction unless another holds it."""
    return (select(prompt_run.c.id).where(prompt_run.c.id == run_id, prompt_run.c.status == RunStatus.RUNNING)
            .with_for_update(skip_locked=True))


def run_has_unscored_items(conn: Connection, run_id: int) -> bool:
    """A plain read: a PENDING item is PENDING in every committed version until its
    write-back commits, so this cannot miss one (unlike a SKIP LOCKED read)."""
    i = prompt_run_item
    return conn.execute(select(i.c.id).where(i.c.run_id == run_id, i.c.verdict == Verdict.PENDING)
                        .limit(1)).first() is not None


def finalizable_runs(conn: Connection, limit: int) -> list[int]:
    """Runs to finalize in this transaction: candidates, each locked (SKIP LOCKED: another
    finalizer takes it) and checked again under the lock."""
    ready = []
    for run_id in conn.execute(finalize_candidates_query(limit)).scalars().all():
        if conn.execute(lock_run_query(run_id)).first() is not None and not run_has_unscored_items(conn, run_id):
            ready.append(run_id)
    return ready


# --- items -----------------------------------------------------------------------------

def existing_item_ids(conn: Connection, run_id: int, item_ids: Sequence[str]) -> list[str]:
    if not item_ids:
        return []
    return list(conn.execute(select(prompt_run_item.c.item_id)
                             .where(prompt_run_item.c.run_id == run_id,
                                    prompt_run_item.c.item_id.in_(list(item_ids)))).scalars())


MAX_INSERT_CHARS = 1_000_000   # one multi-row INSERT stays far below max_allowed_packet (16 MiB on MariaDB)


def insert_items(conn: Connection, run_id: int, rows: Sequence[tuple[str, str, str]]) -> int:
    """Insert one page of (item_id, input as JSON text, expected) rows. The input arrives
    serialized (it was size-checked and hashed in that form); verdict, attempt and
    lease_until take their column defaults (PENDING, 0, EPOCH: visible at once).

    This is materialize's hot path. On PyMySQL over utf8 the page goes as multi-row
    INSERTs of quoted literals (``_string_literal``), the SQL text the driver's
    ``executemany`` sends, for a fraction of its per-row cost (measured 13.6 vs ~4 µs per
    row here). Other drivers get a driver executemany of positional tuples."""
    if not rows:
        return 0
    literal = _string_literal(conn)
    if literal is None:
        mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
        conn.exec_driver_sql(f"INSERT INTO prompt_run_item (run_id, item_id, input, expected_decision) "
                             f"VALUES ({mark}, {mark}, {mark}, {mark})",
                             [(run_id, item_id, input_json, expected) for item_id, input_json, expected in rows])
        return len(rows)
    head = "INSERT INTO prompt_run_item (run_id, item_id, input, expected_decision) VALUES "
    run = int(run_id)
    ids, inputs, labels = (literal.escape_all(column) for column in zip(*rows))
    values = [f"({run},'{item_id}','{input_json}','{expected}')"
              for item_id, input_json, expected in zip(ids, inputs, labels)]
    for statement in _multi_row_statements(head, values, MAX_INSERT_CHARS):
        # no_parameters: the text goes to cursor.execute alone, so a '%' in the data is data
        conn.exec_driver_sql(statement, execution_options={"no_parameters": True})
    return len(rows)


def _string_literal(conn: Connection) -> "_Literals | None":
    """What quotes a str as a MySQL string literal for this connection, or None where the
    caller should let the driver bind values.

    MySQL needs only the backslash and the quote escaped inside a quoted literal
    (mysql_real_escape_string also escapes NUL, CR, LF and ^Z, for log readability), or,
    under the NO_BACKSLASH_ESCAPES sql_mode, only the quote doubled. That holds for utf8
    connections; multi-byte charsets whose characters can contain the byte 0x5C (GBK,
    SJIS...) are left to the driver."""
    driver = conn.connection.dbapi_connection
    if conn.dialect.driver != "pymysql" or getattr(driver, "charset", None) not in ("utf8mb4", "utf8", "utf8mb3"):
        return None
    from pymysql.constants import SERVER_STATUS
    return _Literals(bool((driver.server_status or 0) & SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES))


class _Literals:
    """MySQL string literals in one escaping mode: calling it quotes one text;
    ``escape_all(texts)`` escapes a whole column (without the quotes around each)."""

    SEPARATOR = "\x00"

    def __init__(self, no_backslash_escapes: bool):
        self.escape = (lambda text: text.replace("'", "''")) if no_backslash_escapes else \
            (lambda text: text.replace("\\", "\\\\").replace("'", "\\'"))

    def __call__(self, text: str) -> str:
        return "'" + self.escape(text) + "'"

    def escape_all(self, texts: Sequence[str]) -> list[str]:
        """One escaping pass over the column joined by a separator that none of the texts
        holds (one by one otherwise): a page's 3,000 values cost a few calls, not 6,000."""
        joined = self.SEPARATOR.join(texts)
        if joined.count(self.SEPARATOR) != len(texts) - 1:
            return [self.escape(text) for text in texts]
        return self.escape(joined).split(self.SEPARATOR)


def _multi_row_statements(head: str, values: list[str], max_chars: int):
    if len(head) + sum(map(len, values)) + len(values) <= max_chars:   # the usual page: one statement
        yield head + ",".join(values)
        return
    start, size = 0, len(head)
    for end, value in enumerate(values):
        if size + len(value) + 1 > max_chars and end > start:
            yield head + ",".join(values[start:end])
            start, size = end, len(head)
        size += len(value) + 1
    yield head + ",".join(values[start:])


def item_claim_query(run_id: int, limit: int, attempt_cap: int):
    """Ready items of one run: a range scan of the (run_id, verdict, lease_until) index in
    lease order, no filesort; rows another claimer holds are skipped."""
    return _ITEM_CLAIM.params(run_id=run_id, limit=limit, attempt_cap=attempt_cap)


def _item_claim_statements():
    """The claim's two statements, built once with bound parameters: building them per
    claim cost more CPU than running them (~1.5 of ~4.5 ms per claim, measured)."""
    i = prompt_run_item
    claim = (select(i.c.id, i.c.item_id, i.c.input, i.c.expected_decision, i.c.attempt)
             .where(i.c.run_id == bindparam("run_id", type_=BigInteger), i.c.verdict == Verdict.PENDING,
                    i.c.lease_until <= db_now(), i.c.attempt < bindparam("attempt_cap", type_=Integer))
             .order_by(i.c.lease_until).limit(bindparam("limit", type_=Integer))
             .with_for_update(skip_locked=True))
    lease = (update(i).where(i.c.id.in_(bindparam("ids", expanding=True)))
             .values(lease_token=bindparam("token", type_=String),
                     lease_until=db_now(bindparam("lease_seconds", type_=Float)), attempt=i.c.attempt + 1))
    return claim, lease


_ITEM_CLAIM, _ITEM_LEASE = _item_claim_statements()


def claim_items(conn: Connection, run_id: int, limit: int, lease_seconds: float,
                attempt_cap: int) -> tuple[str, list[ClaimedItem]]:
    """Claim up to ``limit`` ready items of one run, then lease them with one UPDATE
    and a fresh random token."""
    rows = conn.execute(_ITEM_CLAIM, {"run_id": run_id, "limit": limit, "attempt_cap": attempt_cap}).all()
    token = new_token()
    if not rows:
        return token, []
    conn.execute(_ITEM_LEASE, {"ids": [r.id for r in rows], "token": token, "lease_seconds": lease_seconds})
    return token, [ClaimedItem(r.id, run_id, r.item_id, r.input, r.expected_decision, r.attempt + 1)
                   for r in rows]


def renew_item_leases(conn: Connection, ids: Sequence[int], token: str, lease_seconds: float) -> int:
    return conn.execute(update(prompt_run_item)
                        .where(prompt_run_item.c.id.in_(list(ids)), prompt_run_item.c.lease_token == token,
                               prompt_run_item.c.lease_until > db_now())
                        .values(lease_until=db_now(lease_seconds))).rowcount


def write_item_results(conn: Connection, token: str, results: Sequence[ItemResult]) -> int:
    """Write a chunk's results in one UPDATE (CASE on id), guarded by the lease token and
    ``lease_until > now``. Returns the rows written; fewer than asked = ownership lost."""
    if not results:
        return 0
    quote = _string_literal(conn)
    if quote is not None:
        sql = _item_results_sql(token, results, quote)
        return conn.exec_driver_sql(sql, execution_options={"no_parameters": True}).rowcount
    ids = [r.id for r in results]
    key = prompt_run_item.c.id

    def by_id(attr: str, column):
        values = {r.id: getattr(r, attr) for r in results}
        if len(set(map(repr, values.values()))) == 1:
            value = next(iter(values.values()))
            return literal(value, column.type) if value is not None else None
        return case({i: literal(v, column.type) if v is not None else None for i, v in values.items()},
                    value=key, else_=column)

    retry_at = {r.id: db_now(r.retry_in) for r in results if r.verdict == Verdict.PENDING}
    values: dict[str, Any] = {
        "verdict": by_id("verdict", prompt_run_item.c.verdict),
        "actual_decision": by_id("actual_decision", prompt_run_item.c.actual_decision),
        "raw_output": by_id("raw_output", prompt_run_item.c.raw_output),
        "latency_ms": by_id("latency_ms", prompt_run_item.c.latency_ms),
        "prompt_tokens": by_id("prompt_tokens", prompt_run_item.c.prompt_tokens),
        "completion_tokens": by_id("completion_tokens", prompt_run_item.c.completion_tokens),
        "error": by_id("error", prompt_run_item.c.error),
        "lease_token": None,
    }
    if retry_at:
        visible = case(retry_at, value=key, else_=_epoch_literal())
        values["lease_until"] = visible
        values["next_attempt_at"] = case(retry_at, value=key, else_=None)
    else:
        values["lease_until"] = _epoch_literal()
    return conn.execute(update(prompt_run_item)
                        .where(key.in_(ids), prompt_run_item.c.lease_token == token,
                               prompt_run_item.c.lease_until > db_now())
                        .values(**values)).rowcount


RESULT_COLUMNS = ("verdict", "actual_decision", "raw_output", "latency_ms", "prompt_tokens", "completion_tokens",
                  "error")


def _item_results_sql(token: str, results: Sequence[ItemResult], quote) -> str:
    """The MySQL text of ``write_item_results``' UPDATE, values quoted by ``quote``.

    The SQLAlchemy form binds 7 CASE branches per item (1,800 parameters for a chunk of
    256); building, caching and escaping those cost ~40 ms of CPU per chunk here, more than
    the statement's commit. This builds the same statement as text in well under 1 ms."""
    def sql_value(value) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, str):
            return quote(value)
        return str(int(value))

    def by_id(values: list[str]) -> str:
        if len(set(values)) == 1:
            return values[0]
        return "CASE id " + " ".join(f"WHEN {r.id} THEN {v}" for r, v in zip(results, values)) + " END"

    sets = [f"{column} = {by_id([sql_value(getattr(r, column)) for r in results])}" for column in RESULT_COLUMNS]
    sets.append("lease_token = NULL")
    retry = [(r.id, round(float(r.retry_in or 0) * 1_000_000)) for r in results if r.verdict == Verdict.PENDING]
    if retry:
        at = " ".join(f"WHEN {i} THEN TIMESTAMPADD(MICROSECOND, {us}, UTC_TIMESTAMP(6))" for i, us in retry)
        sets.append(f"lease_until = CASE id {at} ELSE '{EPOCH}' END")
        sets.append(f"next_attempt_at = CASE id {at} ELSE NULL END")
    else:
        sets.append(f"lease_until = '{EPOCH}'")
    ids = ",".join(str(int(r.id)) for r in results)
    return (f"UPDATE prompt_run_item SET {', '.join(sets)} "
            f"WHERE id IN ({ids}) AND lease_token = {quote(token)} AND lease_until > UTC_TIMESTAMP(6)")


def _epoch_literal():
    return literal(_epoch(), DateTime())


def release_items(conn: Connection, token: str) -> int:
    """Give back a claim untouched (a draining worker): visible again at once."""
    return conn.execute(update(prompt_run_item)
                        .where(prompt_run_item.c.lease_token == token)
                        .values(lease_token=None, lease_until=_epoch_literal(),
                                attempt=prompt_run_item.c.attempt - 1)).rowcount


def fail_exhausted_items(conn: Connection, run_id: int, attempt_cap: int) -> int:
    """Items whose every attempt was claimed and lost (crashed workers): final ERROR."""
    return conn.execute(update(prompt_run_item)
                        .where(prompt_run_item.c.run_id == run_id,
                               prompt_run_item.c.verdict == Verdict.PENDING,
                               prompt_run_item.c.lease_until <= db_now(),
                               prompt_run_item.c.attempt >= attempt_cap)
                        .values(verdict=Verdict.ERROR, lease_token=None,
                                error=func.coalesce(prompt_run_item.c.error, "no result after every attempt"))
                        ).rowcount


def run_breakdown(conn: Connection, run_id: int) -> list[tuple[str, str, str | None, int]]:
    """(verdict, expected, actual, count): the one GROUP BY finalize derives metrics from."""
    i = prompt_run_item
    return [tuple(r) for r in conn.execute(
        select(i.c.verdict, i.c.expected_decision, i.c.actual_decision, func.count())
        .where(i.c.run_id == run_id)
        .group_by(i.c.verdict, i.c.expected_decision, i.c.actual_decision))]


def run_counts(conn: Connection, run_ids: Sequence[int]) -> dict[int, RunCounts]:
    if not run_ids:
        return {}
    i = prompt_run_item
    counts: dict[int, dict[str, int]] = {rid: {} for rid in run_ids}
    for run_id, verdict, n in conn.execute(select(i.c.run_id, i.c.verdict, func.count())
                                           .where(i.c.run_id.in_(list(run_ids)))
                                           .group_by(i.c.run_id, i.c.verdict)):
        counts[run_id][verdict] = n
    return {rid: RunCounts(total=sum(c.values()), pending=c.get(Verdict.PENDING, 0), match=c.get(Verdict.MATCH, 0),
                           mismatch=c.get(Verdict.MISMATCH, 0), error=c.get(Verdict.ERROR, 0))
            for rid, c in counts.items()}


def failing_items(conn: Connection, run_id: int, limit: int) -> list[ItemSample]:
    i = prompt_run_item
    rows = conn.execute(select(i.c.item_id, i.c.expected_decision, i.c.actual_decision, i.c.verdict,
                               i.c.raw_output, i.c.error)
                        .where(i.c.run_id == run_id, i.c.verdict.in_([Verdict.MISMATCH, Verdict.ERROR]))
                        .order_by(i.c.id).limit(limit))
    return [ItemSample(*r) for r in rows]


def item_attempt_stats(conn: Connection, run_ids: Sequence[int]) -> dict[str, int]:
    """Calls beyond the first per item (retries and re-claims), for status and reports."""
    if not run_ids:
        return {"retried_items": 0, "extra_attempts": 0, "max_attempt": 0}
    i = prompt_run_item
    retried = func.coalesce(func.sum(case((i.c.attempt > 1, 1), else_=0)), 0)
    extra = func.coalesce(func.sum(case((i.c.attempt > 1, i.c.attempt - 1), else_=0)), 0)
    row = conn.execute(select(retried, extra, func.coalesce(func.max(i.c.attempt), 0))
                       .where(i.c.run_id.in_(list(run_ids)))).first()
    return {"retried_items": int(row[0]), "extra_attempts": int(row[1]), "max_attempt": int(row[2])}


# --- workers -----------------------------------------------------------------------------

def register_worker(conn: Connection, worker_id: str, role: str, host: str, pid: int) -> None:
    conn.execute(insert(worker).values(id=worker_id, role=role, host=host, pid=pid,
                                       started_at=db_now(), heartbeat_at=db_now()))


def heartbeat_worker(conn: Connection, worker_id: str) -> bool:
    return conn.execute(update(worker).where(worker.c.id == worker_id)
                        .values(heartbeat_at=db_now())).rowcount == 1


def remove_worker(conn: Connection, worker_id: str) -> None:
    conn.execute(delete(worker).where(worker.c.id == worker_id))


def live_workers(conn: Connection, stale_seconds: float) -> list[WorkerRow]:
    rows = conn.execute(select(worker).where(worker.c.heartbeat_at > db_now(-stale_seconds))
                        .order_by(worker.c.role, worker.c.started_at))
    return [WorkerRow(*r) for r in rows]


def prune_workers(conn: Connection, stale_seconds: float) -> int:
    return conn.execute(delete(worker).where(worker.c.heartbeat_at <= db_now(-stale_seconds))).rowcount


# --- rate limits: token buckets shared by every worker (issue 7) --------------------------
#
# One ``rate_limit_bucket`` row per limit (gate/ratelimit.py names them). ``take_rate_tokens``
# refills the bucket from the time elapsed since ``updated_at`` and spends ``cost`` in ONE
# conditional UPDATE: the "not paused" and "enough tokens" checks sit in its WHERE clause,
# so the affected-row count (rows *matched* on MySQL) says granted or not. No read first:
# concurrent workers serialize on the row lock (MySQL) or the write lock (SQLite), and each
# sees the row as the previous one left it. Elapsed time comes from the database's clock,
# which every worker on every machine shares. Assignment order matters on MySQL (a SET
# sees the columns assigned before it), hence ``ordered_values`` with ``tokens`` first.

from sqlalchemy.ext.compiler import compiles as _compiles  # noqa: E402  (imports of this appended section stay with it)
from sqlalchemy.sql.expression import FunctionElement as _FunctionElement  # noqa: E402

from dataclasses import dataclass as _dataclass  # noqa: E402


@_dataclass(frozen=True)
class RateBucketState:
    """A bucket as of now: tokens after refill, its size and rate, how long it stays paused."""
    name: str
    tokens: float
    capacity: float
    refill_per_second: float
    paused_for: float
    granted: int
    rate_limited: int

    def wait_for(self, cost: float) -> float:
        """Seconds until ``cost`` tokens could be there (inf when the bucket never refills)."""
        if self.tokens >= cost:
            return self.paused_for
        if self.refill_per_second <= 0:
            return float("inf")
        return self.paused_for + (cost - self.tokens) / self.refill_per_second   # refill restarts after a pause

rate_limit_bucket = Table("rate_limit_bucket", meta,
                          Column("name", String(191), primary_key=True), Column("capacity", Float),
                          Column("refill_per_second", Float), Column("tokens", Float),
                          Column("updated_at", T), Column("paused_until", T), Column("granted", BigInteger),
                          Column("rate_limited", BigInteger), Column("last_grant", Integer),
                          Column("created_at", T))
rate_limit_usage = Table("rate_limit_usage", meta,
                         Column("run_id", BigInteger, primary_key=True), Column("throttled", BigInteger),
                         Column("throttled_ms", BigInteger), Column("rate_limited", BigInteger),
                         Column("updated_at", T))


class seconds_since(_FunctionElement):
    """Seconds from a time column to the database's now (negative when it lies ahead)."""

    type = Float()
    inherit_cache = True
    name = "seconds_since"


@_compiles(seconds_since, "mysql")
def _seconds_since_mysql(element, compiler, **kw):
    (arg,) = list(element.clauses)
    return f"(TIMESTAMPDIFF(MICROSECOND, {compiler.process(arg, **kw)}, UTC_TIMESTAMP(6)) * 1e-6)"


@_compiles(seconds_since, "sqlite")
def _seconds_since_sqlite(element, compiler, **kw):
    (arg,) = list(element.clauses)
    return f"((julianday('now') - julianday({compiler.process(arg, **kw)})) * 86400.0)"


class _least(_FunctionElement):
    """LEAST(a, b) on MySQL, the two-argument min(a, b) on SQLite."""
    inherit_cache = True
    name = "least"

    def __init__(self, a, b):
        super().__init__(a, b)
        self.type = a.type


class _greatest(_least):
    """GREATEST(a, b) on MySQL, the two-argument max(a, b) on SQLite."""
    inherit_cache = True
    name = "greatest"


@_compiles(_least, "mysql")
@_compiles(_greatest, "mysql")
def _extreme_mysql(element, compiler, **kw):
    return f"{element.name.upper()}({compiler.process(element.clauses, **kw)})"


class _floor_div(_FunctionElement):
    """FLOOR(a / b) for non-negative a and positive b, as an integer."""
    inherit_cache = True
    name = "floor_div"
    type = Integer()


@_compiles(_floor_div, "mysql")
def _floor_div_mysql(element, compiler, **kw):
    a, b = list(element.clauses)
    return f"FLOOR({compiler.process(a, **kw)} / {compiler.process(b, **kw)})"


@_compiles(_floor_div, "sqlite")
def _floor_div_sqlite(element, compiler, **kw):
    a, b = list(element.clauses)
    return f"CAST({compiler.process(a, **kw)} / {compiler.process(b, **kw)} AS INTEGER)"


@_compiles(_least, "sqlite")
@_compiles(_greatest, "sqlite")
def _extreme_sqlite(element, compiler, **kw):
    return f"{'min' if element.name == 'least' else 'max'}({compiler.process(element.clauses, **kw)})"


def _available_tokens():
    """The bucket's tokens as of now: refilled for the elapsed time, up to capacity."""
    b = rate_limit_bucket
    elapsed = _greatest(seconds_since(b.c.updated_at), literal(0.0, Float()))
    return _least(b.c.capacity, b.c.tokens + elapsed * b.c.refill_per_second)


def ensure_rate_bucket(conn: Connection, name: str, capacity: float, refill_per_second: float) -> bool:
    """Create the bucket (full), or bring an existing one to the configured size and rate.
    Returns True when created."""
    b = rate_limit_bucket
    capacity, refill_per_second = float(capacity), float(refill_per_second)
    found = conn.execute(update(b).where(b.c.name == name)
                         .values(capacity=capacity, refill_per_second=refill_per_second,
                                 tokens=_least(b.c.tokens, literal(capacity, Float())))).rowcount
    if found == 1:
        return False
    try:
        with conn.begin_nested():
            conn.execute(insert(b).values(name=name, capacity=capacity, refill_per_second=refill_per_second,
                                          tokens=capacity, updated_at=db_now(), paused_until=_epoch(),
                                          granted=0, rate_limited=0, last_grant=0, created_at=db_now()))
        return True
    except IntegrityError:
        return False          # another worker created it a moment ago


def take_rate_tokens(conn: Connection, name: str, cost: float, up_to: int = 1) -> int:
    """Refill and spend in one conditional UPDATE: as many calls of ``cost`` tokens as the
    bucket holds, at most ``up_to``, and only when it holds at least one call's worth.
    Returns the calls granted (0 = refused). Every SET expression reads the row as it was
    (on MySQL they come before the columns they read are assigned); with ``up_to`` > 1 the
    count granted is read back from the row this transaction holds locked."""
    b = rate_limit_bucket
    cost, up_to = float(cost), max(1, int(up_to))
    available = _available_tokens()
    calls = _least(_floor_div(available, cost), literal(up_to, Integer())) if up_to > 1 else literal(1, Integer())
    matched = conn.execute(update(b)
                           .where(b.c.name == name, b.c.paused_until <= db_now(), available >= cost)
                           .ordered_values((b.c.last_grant, calls),
                                           (b.c.granted, b.c.granted + calls),
                                           (b.c.tokens, available - calls * cost),
                                           (b.c.updated_at, _greatest(b.c.updated_at, db_now())))).rowcount
    if matched != 1:
        return 0
    if up_to == 1:
        return 1
    return int(conn.execute(select(b.c.last_grant).where(b.c.name == name)).scalar())


def rate_bucket_state(conn: Connection, name: str) -> RateBucketState | None:
    """The bucket as of now (for how long to sleep after a refusal; never to decide a grant)."""
    b = rate_limit_bucket
    row = conn.execute(select(_available_tokens(), b.c.capacity, b.c.refill_per_second,
                              seconds_since(b.c.paused_until), b.c.granted, b.c.rate_limited)
                       .where(b.c.name == name)).first()
    if row is None:
        return None
    return RateBucketState(name=name, tokens=float(row[0]), capacity=float(row[1]),
                           refill_per_second=float(row[2]), paused_for=max(0.0, -float(row[3])),
                           granted=int(row[4]), rate_limited=int(row[5]))


def pause_rate_bucket(conn: Connection, name: str, seconds: float) -> bool:
    """A provider's 429: no grants for ``seconds`` (a longer pause already set stays), the
    bucket emptied so that it refills from the end of the pause, not in one burst."""
    b = rate_limit_bucket
    until = db_now(float(seconds))
    return conn.execute(update(b).where(b.c.name == name)
                        .ordered_values((b.c.paused_until, _greatest(b.c.paused_until, until)),
                                        (b.c.tokens, literal(0.0, Float())),
                                        (b.c.updated_at, _greatest(b.c.updated_at, until)),
                                        (b.c.rate_limited, b.c.rate_limited + 1))).rowcount == 1


def rate_buckets(conn: Connection) -> list[RateBucketState]:
    names = conn.execute(select(rate_limit_bucket.c.name).order_by(rate_limit_bucket.c.name)).scalars().all()
    return [s for s in (rate_bucket_state(conn, n) for n in names) if s is not None]


def add_rate_limit_usage(conn: Connection, run_id: int, *, throttled: int = 0, throttled_ms: int = 0,
                         rate_limited: int = 0) -> None:
    """Add an executor's counts for one run: calls that waited for the budget, the wait,
    and 429s from the provider."""
    u = rate_limit_usage
    bump = update(u).where(u.c.run_id == run_id).values(
        throttled=u.c.throttled + int(throttled), throttled_ms=u.c.throttled_ms + int(throttled_ms),
        rate_limited=u.c.rate_limited + int(rate_limited), updated_at=db_now())
    if conn.execute(bump).rowcount == 1:
        return
    try:
        with conn.begin_nested():
            conn.execute(insert(u).values(run_id=run_id, throttled=int(throttled), throttled_ms=int(throttled_ms),
                                          rate_limited=int(rate_limited), updated_at=db_now()))
        return
    except IntegrityError:
        pass                  # inserted by another worker meanwhile: add to it
    if conn.execute(bump).rowcount != 1:
        raise NotFound(f"rate-limit usage row of run {run_id} vanished")


def rate_limit_stats(conn: Connection, run_ids: Sequence[int]) -> dict[str, int]:
    """For status and reports: calls that waited for the shared budget, the seconds they
    waited, and calls the provider answered with 429."""
    if not run_ids:
        return {"throttled_calls": 0, "throttle_wait_seconds": 0, "rate_limited_calls": 0}
    u = rate_limit_usage
    row = conn.execute(select(func.coalesce(func.sum(u.c.throttled), 0), func.coalesce(func.sum(u.c.throttled_ms), 0),
                              func.coalesce(func.sum(u.c.rate_limited), 0))
                       .where(u.c.run_id.in_(list(run_ids)))).first()
    return {"throttled_calls": int(row[0]), "throttle_wait_seconds": round(int(row[1]) / 1000),
            "rate_limited_calls": int(row[2])}
