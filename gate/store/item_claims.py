"""The statements of an item's claim (``items.claim_items``, ``items.claim_items_from``), each
defined once in SQLAlchemy: its locking read, the lease of what it locked, and the locked
items read as the executor needs them. ``items`` builds them once with bound parameters and
runs them, through ``textsql``'s template on PyMySQL; ``item_claim_from_sql`` is the claim as
MySQL text, for an EXPLAIN."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    Integer,
    String,
    bindparam,
    case,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement

from gate.states import Verdict

from .dialect import db_now, seconds_since
from .schema import EPOCH, dataset_row, prompt_run, prompt_run_item
from .textsql import Literals, Template


def claim_statement():
    """The claim's locking read: a run's ready items in lease order (``items.item_claim_query``)."""
    i = prompt_run_item
    return (
        select(i.c.position)
        .where(
            i.c.run_id == bindparam("run_id", type_=BigInteger),
            i.c.verdict == Verdict.PENDING,
            i.c.lease_until <= db_now(),
        )
        .order_by(i.c.lease_until)
        .limit(bindparam("limit", type_=Integer))
        .with_for_update(skip_locked=True)
    )


class _never_leased(FunctionElement):
    """``lease_until`` still EPOCH (an item never leased, or given back): on MySQL "= EPOCH",
    one range of ``ix_item_ready`` whose order then is the position's (no filesort); on
    SQLite "<= EPOCH", since its text spells EPOCH two ways (the column's default and a
    bound datetime)."""

    type = Boolean()
    inherit_cache = True
    name = "never_leased"
    _is_implicitly_boolean = True  # a comparison: no "= 1" after it where booleans are not native


@compiles(_never_leased, "mysql")
def _never_leased_mysql(element, compiler, **kw):
    (column,) = list(element.clauses)
    return f"{compiler.process(column, **kw)} = {compiler.process(literal(EPOCH, DateTime()), **kw)}"


@compiles(_never_leased)
def _never_leased_other(element, compiler, **kw):
    (column,) = list(element.clauses)
    return f"{compiler.process(column, **kw)} <= {compiler.process(literal(EPOCH, DateTime()), **kw)}"


def claim_from_statement():
    """``items.claim_items_from``' locking read: items never leased, from a position on, with what
    the executor needs of each (a locking read through the index locks each item's row as
    well, so reading its columns costs no more lookups; the dataset row's input is read by
    whoever renders the chunk: ``versions.version_inputs``). The one definition of its
    SQLAlchemy and text forms (``textsql``)."""
    i = prompt_run_item
    return (
        select(
            i.c.position,
            i.c.item_id,
            i.c.expected_decision,
            i.c.attempt,
            i.c.input,
            seconds_since(i.c.throttled_since).label("throttled_for"),
        )
        .with_hint(i, "FORCE INDEX (ix_item_ready)", "mysql")
        .with_hint(i, "INDEXED BY ix_item_ready", "sqlite")
        .where(
            i.c.run_id == bindparam("run_id", type_=BigInteger),
            i.c.verdict == Verdict.PENDING,
            _never_leased(i.c.lease_until),
            i.c.position >= bindparam("from_position", type_=BigInteger),
        )
        .order_by(i.c.lease_until, i.c.position)
        .limit(bindparam("limit", type_=Integer))
        .with_for_update(skip_locked=True)
    )


def lease_statement():
    """The lease of the locked items under the caps: a fresh token, one more claim in a row
    (1 when the item's last claim was written back or given back: its token is NULL then).
    ``claims`` is set before the token: MySQL's SET reads the columns assigned before it.
    The attempt is not counted here: a claim is not a call (the write-back counts it).
    The one definition of its SQLAlchemy and text forms (``textsql``)."""
    i = prompt_run_item
    return (
        update(i)
        .where(
            i.c.run_id == bindparam("claimed_run", type_=BigInteger),
            i.c.position.in_(bindparam("positions", expanding=True)),
            i.c.attempt < bindparam("attempt_cap", type_=Integer),
            or_(i.c.lease_token.is_(None), i.c.claims < bindparam("claim_cap", type_=Integer)),
        )
        .ordered_values(
            (i.c.claims, case((i.c.lease_token.is_(None), 1), else_=i.c.claims + 1)),
            (i.c.lease_token, bindparam("token", type_=String)),
            (i.c.lease_until, db_now(bindparam("lease_seconds", type_=Float))),
        )
    )


def claimed_statement():
    """The locked items as the executor needs them, with their dataset row's input, read
    before their lease: whether the last claim of each was lost (its token still set), its
    claims in a row and attempts so far, and how long the provider has been asking it to
    wait (seconds since ``throttled_since``)."""
    i, r = prompt_run_item, dataset_row
    version = select(prompt_run.c.dataset_version_id).where(prompt_run.c.id == i.c.run_id).scalar_subquery()
    return (
        select(
            i.c.position,
            i.c.item_id,
            i.c.expected_decision,
            i.c.attempt,
            i.c.lease_token.is_not(None).label("lost"),
            i.c.claims,
            seconds_since(i.c.throttled_since).label("throttled_for"),
            func.coalesce(i.c.input, r.c.input, type_=i.c.input.type).label("input"),
        )
        .select_from(i.outerjoin(r, (r.c.version_id == version) & (r.c.position == i.c.position)))
        .where(
            i.c.run_id == bindparam("claimed_run", type_=BigInteger),
            i.c.position.in_(bindparam("positions", expanding=True)),
        )
    )


def item_claim_from_sql(run_id: int, from_position: int, limit: int) -> str:
    """``items.claim_items_from``' locking read as MySQL text, for an EXPLAIN
    (bench/million_rows.py, tests/integration/test_claim_plans.py): its template with
    PyMySQL's dialect, filled as the executor's claim is."""
    from sqlalchemy.dialects.mysql import pymysql

    template = Template.of(claim_from_statement(), pymysql.dialect(), Literals(False))
    return template({"run_id": run_id, "from_position": from_position, "limit": limit})
