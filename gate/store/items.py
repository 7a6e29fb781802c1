"""Items (``prompt_run_item``): a run's rows, copied page by page from its dataset version
by materialize, claimed in chunks under a lease by execute and written back guarded by the
lease token, given back or ended ERROR. The answers kept for reuse: ``answers``; what a
run's items add up to (finalize, status, reports): ``item_stats``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    DateTime,
    Float,
    Integer,
    String,
    and_,
    bindparam,
    case,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.sql.expression import ColumnElement

from gate.records import ClaimedItem, ItemResult
from gate.states import Verdict

from .dialect import db_now
from .item_claims import claim_from_statement, claim_statement, claimed_statement, lease_statement
from .schema import EPOCH, dataset_row, new_token, prompt_run_item
from .textsql import (
    attempt_spent,
    by_position,
    execute_text,
    result_columns,
    stored_value,
    string_literal,
    template,
    update_template,
)


def copy_version_page(
    conn: Connection, run_id: int, version_id: int, start: int, end: int, labels: dict[str, str] | None = None
) -> int:
    """Materialize's hot path: the version's rows at positions [start, end) become the
    run's items in one server-side INSERT ... SELECT (no row crosses the network or is
    parsed again). Items point at their row (``position``) instead of copying its input;
    ``labels`` maps a dataset label to the prompt's spelling where they differ in case.
    Verdict, attempt and lease_until take their defaults (PENDING, 0, EPOCH: ready)."""
    r = dataset_row
    expected: ColumnElement[Any] = r.c.expected_decision
    if labels:
        expected = case(labels, value=r.c.expected_decision, else_=r.c.expected_decision)
    rows = select(literal(int(run_id), BigInteger), r.c.position, r.c.item_id, expected).where(
        r.c.version_id == version_id, r.c.position >= start, r.c.position < end
    )
    i = prompt_run_item
    return conn.execute(
        insert(i).from_select([i.c.run_id, i.c.position, i.c.item_id, i.c.expected_decision], rows)
    ).rowcount


def item_claim_query(run_id: int, limit: int, attempt_cap: int | None = None):
    """Ready items of one run, locked: an index-only range scan of ``ix_item_ready``
    (run_id, verdict, lease_until; the key's position rides along) in lease order, no
    filesort; rows another claimer holds are skipped. Reading nothing but the index, it
    steps over the entries scored items left behind until purge takes them at the cost
    of the index alone. (``attempt_cap`` is the lease's condition, not the scan's.)"""
    return _ITEM_CLAIM.params(run_id=run_id, limit=limit)


# The claim's statements, built once with bound parameters: building them per claim was a
# third of a claim's CPU (see bench/README.md).
_ITEM_CLAIM, _ITEM_CLAIM_FROM = claim_statement(), claim_from_statement()
_ITEM_LEASE, _ITEM_CLAIMED = lease_statement(), claimed_statement()
EXHAUSTED = "no result after every attempt"
LOST = "lost: every claim of it in a row ended without a result (its worker died or lost its lease each time)"
SUSPECT_AFTER = 2  # claims lost in a row after which an item is claimed alone (a suspect)


def claim_items(
    conn: Connection,
    run_id: int,
    limit: int,
    lease_seconds: float,
    attempt_cap: int,
    claim_cap: int = 5,
    suspects: bool = True,
) -> tuple[str, list[ClaimedItem]]:
    """Claim up to ``limit`` ready items of one run: lock them (``item_claim_query``),
    lease those under the caps with one UPDATE and a fresh random token, and return what
    the executor needs of them, with their dataset row's input (read in one non-locking
    read before the lease). An item whose last ``SUSPECT_AFTER`` claims were lost (a
    **suspect**: its workers died holding it, perhaps because of it) is claimed alone, so
    an item that kills every worker that calls it stops taking the items claimed with it
    along (once lost, they come back together; twice, each alone); ``suspects`` False
    (the caller holds one already) claims none of them. A locked item at a cap — its attempts
    spent, or ``claim_cap`` claims in a row lost — ends ERROR here, as finalize's sweep
    would end it, rather than fill every claim meanwhile."""
    positions: list[int] = list(conn.execute(_ITEM_CLAIM, {"run_id": run_id, "limit": limit}).scalars())
    return _lease_claimed(conn, run_id, positions, lease_seconds, attempt_cap, claim_cap, suspects)


def claim_items_from(
    conn: Connection,
    run_id: int,
    from_position: int,
    limit: int,
    lease_seconds: float,
    attempt_cap: int,
    claim_cap: int = 5,
) -> tuple[str, list[ClaimedItem]]:
    """``claim_items`` for the items of one run never leased yet (``lease_until`` still
    EPOCH) at ``from_position`` or after, in position order: what an executor claims
    while it goes through a run front to back.

    Why: every claim and write-back moves an item's ``ix_item_ready`` entry and leaves the
    old one delete-marked until InnoDB's purge takes it, and ``claim_items``' scan starts at
    the run's first ready position, so it steps over every such entry of the run's items
    claimed before it — more the further purge lags (2 ms for 256 items with purge caught
    up, 12 ms with ~85 commits unpurged, on the bench server: bench/README.md, the database
    path). Starting at the position after the caller's last claim bounds that to what
    other claimers took since. Items given back, retried or whose lease ran out are not
    here: the caller claims with ``claim_items`` once this finds nothing. (An item never
    leased has lost no claim: none is a suspect, and ``claim_cap`` never binds here.)"""
    quote = string_literal(conn)
    if quote is not None:
        return _claim_from_text(conn, quote, run_id, from_position, limit, lease_seconds, attempt_cap, claim_cap)
    rows = conn.execute(_ITEM_CLAIM_FROM, {"run_id": run_id, "limit": limit, "from_position": from_position})
    return _lease_claimed(conn, run_id, [row.position for row in rows], lease_seconds, attempt_cap, claim_cap, False)


def _claim_from_text(
    conn: Connection,
    quote,
    run_id: int,
    from_position: int,
    limit: int,
    lease_seconds: float,
    attempt_cap: int,
    claim_cap: int,
) -> tuple[str, list[ClaimedItem]]:
    """``claim_items_from`` on PyMySQL, as the bare claim pattern: the locking read (with
    each item's own columns) and the lease, their text forms; rows read as tuples. Inputs
    the item does not carry are left None, for the render thread to read
    (``version_inputs``): the claimer, one thread per worker, is a process's serial step
    (bench/README.md)."""
    token = new_token()
    claim = template("claim_from", claim_from_statement, conn, quote)
    rows = execute_text(conn, claim({"run_id": run_id, "from_position": from_position, "limit": limit})).all()
    if not rows:
        return token, []
    exhausted = [row[0] for row in rows if row[3] >= attempt_cap]
    leased = [row for row in rows if row[3] < attempt_cap]
    if leased:
        lease = template("lease", lease_statement, conn, quote)
        params = {
            "claimed_run": run_id,
            "positions": [row[0] for row in leased],
            "token": token,
            "lease_seconds": float(lease_seconds),
            "attempt_cap": attempt_cap,
            "claim_cap": claim_cap,
        }
        execute_text(conn, lease(params))
    if exhausted:
        _fail_exhausted(conn, run_id, exhausted, attempt_cap)
    return token, [
        ClaimedItem(
            run_id,
            position,
            item_id,
            None if text is None else json.loads(text),
            expected,
            attempt + 1,
            1,
            None if throttled is None else float(throttled),
        )
        for position, item_id, expected, attempt, text, throttled in leased
    ]


def _lease_claimed(
    conn: Connection,
    run_id: int,
    positions: list[int],
    lease_seconds: float,
    attempt_cap: int,
    claim_cap: int,
    suspects: bool,
) -> tuple[str, list[ClaimedItem]]:
    """Lease the locked ``positions`` under a fresh token (a suspect alone, when the claim
    may take one: see ``claim_items``) and return them with their inputs; the ones at a cap
    end ERROR."""
    token = new_token()
    if not positions:
        return token, []
    claimed = {"claimed_run": run_id, "positions": positions}
    order = {p: n for n, p in enumerate(positions)}
    # the claim's order: the longest ready first
    rows = sorted(conn.execute(_ITEM_CLAIMED, claimed).all(), key=lambda row: order[row.position])
    exhausted = [r.position for r in rows if r.attempt >= attempt_cap or (r.lost and r.claims >= claim_cap)]
    ready = [r for r in rows if r.position not in exhausted]
    suspect = [r for r in ready if r.lost and r.claims >= SUSPECT_AFTER]
    take = suspect[:1] if suspects and suspect else [r for r in ready if r not in suspect]
    if take:
        conn.execute(
            _ITEM_LEASE,
            {
                "claimed_run": run_id,
                "positions": [r.position for r in take],
                "token": token,
                "lease_seconds": lease_seconds,
                "attempt_cap": attempt_cap,
                "claim_cap": claim_cap,
            },
        )
    if exhausted:
        _fail_exhausted(conn, run_id, exhausted, attempt_cap)
    return token, [
        ClaimedItem(
            run_id,
            r.position,
            r.item_id,
            r.input,
            r.expected_decision,
            r.attempt + 1,
            r.claims + 1 if r.lost else 1,
            None if r.throttled_for is None else float(r.throttled_for),
        )
        for r in sorted(take, key=lambda r: r.position)
    ]


def _fail_exhausted(conn: Connection, run_id: int, positions: list[int], attempt_cap: int) -> int:
    """Items at a cap: final ERROR. Their attempts spent: the last failure's error stays
    (else "no result after every attempt"); their claims lost in a row: ``LOST``."""
    i = prompt_run_item
    return conn.execute(
        update(i)
        .where(i.c.run_id == run_id, i.c.position.in_(positions), i.c.verdict == Verdict.PENDING)
        .values(
            verdict=Verdict.ERROR,
            lease_token=None,
            error=case((i.c.attempt >= attempt_cap, func.coalesce(i.c.error, EXHAUSTED)), else_=LOST),
        )
    ).rowcount


def renew_item_leases(conn: Connection, run_id: int, positions: Sequence[int], token: str, lease_seconds: float) -> int:
    i = prompt_run_item
    return conn.execute(
        update(i)
        .where(
            i.c.run_id == run_id,
            i.c.position.in_(list(positions)),
            i.c.lease_token == token,
            prompt_run_item.c.lease_until > db_now(),
        )
        .values(lease_until=db_now(lease_seconds))
    ).rowcount


def write_item_results(conn: Connection, run_id: int, token: str, results: Sequence[ItemResult]) -> int:
    """Write a chunk's results (items of one run) in one UPDATE (CASE on position), guarded
    by the lease token and ``lease_until > now``. Returns the rows written; fewer than
    asked = ownership lost."""
    if not results:
        return 0
    shape = _results_shape(results)
    values = _result_values(results, shape)
    params: dict[str, Any] = {"chunk_run": run_id, "positions": [r.position for r in results], "token": token}
    if shape[2]:
        params["throttled"] = [r.position for r in results if r.backpressure]
    quote = string_literal(conn)
    if quote is not None:
        update_sql = update_template(shape, lambda: _results_statement(shape), conn, quote)
        return execute_text(conn, update_sql(params, values, len(results))).rowcount
    return conn.execute(_results_statement(shape, values, len(results)), params).rowcount


def _results_shape(results: Sequence[ItemResult]) -> tuple:
    """What of ``_results_statement`` a chunk's results take: the columns they set, whether
    any spent an attempt, any was throttled (backpressure), any is to be retried (PENDING)."""
    return (
        result_columns(results),
        any(attempt_spent(r) for r in results),
        any(r.backpressure for r in results),
        any(r.verdict == Verdict.PENDING for r in results),
    )


def _result_values(results: Sequence[ItemResult], shape: tuple) -> dict[str, dict]:
    """The values of the statement's ``by_position`` cells, {position: value} each."""
    columns, spent, _, retry = shape
    values = {
        column: {r.position: stored_value(r, column) for r in results}
        if column in ("trials", "unstable")
        else {r.position: getattr(r, column) for r in results}
        for column in columns
    }
    if spent:
        values["attempt"] = {r.position: attempt_spent(r) for r in results}
    if retry:
        values["lease_until"] = values["next_attempt_at"] = {
            r.position: float(r.retry_in or 0) for r in results if r.verdict == Verdict.PENDING
        }
    return values


def _results_statement(shape: tuple, values: dict[str, dict] | None = None, rows: int | None = None):
    """A chunk's result UPDATE, the one definition of its SQLAlchemy form (``values``: the
    cells' values, ``rows``: the chunk's results) and its text form (no values: the cells
    are a template's slots, filled per chunk by ``textsql``). Each column a result sets takes
    its value by position (one value for all when they agree); a spent attempt counts; a
    throttled item keeps the time the provider first asked it to wait; an item to retry is
    hidden until its retry time, the others' lease ends (EPOCH); the token is cleared."""
    columns, spent, throttled, retry = shape
    i = prompt_run_item
    key = i.c.position

    def cell(name: str, type_, **kw):
        return by_position(name, key, type_, None if values is None else values[name], rows, **kw)

    sets: dict[str, Any] = {column: cell(column, i.c[column].type, else_=i.c[column]) for column in columns}
    if spent:
        sets["attempt"] = i.c.attempt + cell("attempt", Integer(), else_=literal(0))
    if throttled:
        sets["throttled_since"] = case(
            (key.in_(bindparam("throttled", expanding=True)), func.coalesce(i.c.throttled_since, db_now())),
            else_=i.c.throttled_since,
        )
    sets["lease_token"] = None
    if retry:
        sets["lease_until"] = cell("lease_until", Float(), branch=db_now, else_=literal(EPOCH, DateTime()))
        sets["next_attempt_at"] = cell("next_attempt_at", Float(), branch=db_now)
    else:
        sets["lease_until"] = literal(EPOCH, DateTime())
    return (
        update(i)
        .where(
            i.c.run_id == bindparam("chunk_run", type_=BigInteger),
            key.in_(bindparam("positions", expanding=True)),
            i.c.lease_token == bindparam("token", type_=String),
            i.c.lease_until > db_now(),
        )
        .values(sets)
    )


def release_items(
    conn: Connection, token: str, run_id: int | None = None, positions: Sequence[int] | None = None
) -> int:
    """Give back a claim (or its items at ``positions`` of run ``run_id``) uncalled, guarded
    by the claim's token (a draining worker): visible again at once, the claim not counted
    (nor was an attempt: a claim is not a call)."""
    where = [prompt_run_item.c.lease_token == token]
    if positions is not None:
        where += [prompt_run_item.c.run_id == run_id, prompt_run_item.c.position.in_(list(positions))]
    return conn.execute(
        update(prompt_run_item)
        .where(*where)
        .values(lease_token=None, lease_until=literal(EPOCH, DateTime()), claims=prompt_run_item.c.claims - 1)
    ).rowcount


def fail_exhausted_items(conn: Connection, run_id: int, attempt_cap: int, claim_cap: int = 5) -> int:
    """Items at a cap that nobody holds: their attempts spent, or their last ``claim_cap``
    claims lost in a row (crashed workers): final ERROR (``_fail_exhausted``'s errors)."""
    i = prompt_run_item
    return conn.execute(
        update(i)
        .where(
            i.c.run_id == run_id,
            i.c.verdict == Verdict.PENDING,
            i.c.lease_until <= db_now(),
            or_(i.c.attempt >= attempt_cap, and_(i.c.lease_token.is_not(None), i.c.claims >= claim_cap)),
        )
        .values(
            verdict=Verdict.ERROR,
            lease_token=None,
            error=case((i.c.attempt >= attempt_cap, func.coalesce(i.c.error, EXHAUSTED)), else_=LOST),
        )
    ).rowcount


def fail_unclaimed_items(conn: Connection, run_id: int, reason: str) -> int:
    """Every item of the run that nobody holds: final ERROR with ``reason``, uncalled (its
    template overran its budget on another item: the run's verdict is FAILED already).
    Items under a lease are left to their holder."""
    return conn.execute(
        update(prompt_run_item)
        .where(
            prompt_run_item.c.run_id == run_id,
            prompt_run_item.c.verdict == Verdict.PENDING,
            prompt_run_item.c.lease_until <= db_now(),
        )
        .values(verdict=Verdict.ERROR, lease_token=None, error=reason)
    ).rowcount
