"""Spend: the gate config's ``limits:`` (``gate_limit``), the calls and cost an update
reserves against its caps (``prompt_update.calls_reserved``, ``cost_reserved_nanousd``),
and the counters /metrics reads (``gate_counter``).

A reservation is ONE conditional UPDATE, as a rate-limit bucket's take is
(``ratelimits.take_rate_tokens``): the caps sit in its WHERE clause, so the row count says
granted or not, and concurrent workers on every machine serialize on the update's row and
each sees it as the previous one left it; no read first, nothing decided in the
application. A cap is never exceeded: a call is made only after its reservation commits."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gate.states import UpdateStatus

from .dialect import db_now, greatest, update_or_insert
from .schema import gate_counter, gate_limit, prompt_update


def reserve_spend(
    conn: Connection, update_id: int, calls: int, cost_nanousd: int, max_calls: int | None, max_cost_nanousd: int | None
) -> bool:
    """Reserve ``calls`` calls costing at most ``cost_nanousd`` (US dollars × 10⁹, held as
    in flight until settled) for a RUNNING update that was not stopped, within its caps
    (None: none). True: granted."""
    u = prompt_update
    where = [u.c.id == update_id, u.c.status == UpdateStatus.RUNNING, u.c.stopped.is_(None)]
    if max_calls is not None:
        where.append(u.c.calls_reserved + int(calls) <= int(max_calls))
    if max_cost_nanousd is not None:
        where.append(u.c.cost_reserved_nanousd + int(cost_nanousd) <= int(max_cost_nanousd))
    return (
        conn.execute(
            update(u)
            .where(*where)
            .values(
                calls_reserved=u.c.calls_reserved + int(calls),
                cost_reserved_nanousd=u.c.cost_reserved_nanousd + int(cost_nanousd),
                cost_in_flight_nanousd=u.c.cost_in_flight_nanousd + int(cost_nanousd),
            )
        ).rowcount
        == 1
    )


def release_spend(conn: Connection, update_id: int, calls: int, cost_nanousd: int) -> int:
    """Give back a reservation whose call was not made (its update stopped between the grant
    and the call): ``calls_reserved`` counts the calls begun, which the spend cap's
    reason reports as the calls made."""
    u = prompt_update
    return conn.execute(
        update(u)
        .where(u.c.id == update_id)
        .values(
            calls_reserved=greatest(u.c.calls_reserved - int(calls), 0),
            cost_reserved_nanousd=greatest(u.c.cost_reserved_nanousd - int(cost_nanousd), 0),
            cost_in_flight_nanousd=greatest(u.c.cost_in_flight_nanousd - int(cost_nanousd), 0),
        )
    ).rowcount


def settle_spend(conn: Connection, update_id: int, reserved_nanousd: int, spent_nanousd: int) -> int:
    """A call reserved at ``reserved_nanousd`` answered: it is no longer in flight, and its
    reservation becomes what it cost (``spent_nanousd``: less goes back; more, when the
    provider answered past the bound, is added, so the figures say what was spent)."""
    u = prompt_update
    change = int(spent_nanousd) - int(reserved_nanousd)
    return conn.execute(
        update(u)
        .where(u.c.id == update_id)
        .values(
            cost_reserved_nanousd=greatest(u.c.cost_reserved_nanousd + change, 0),
            cost_in_flight_nanousd=greatest(u.c.cost_in_flight_nanousd - int(reserved_nanousd), 0),
        )
    ).rowcount


def spend_of_update(conn: Connection, update_id: int) -> tuple[int, int, int]:
    """(calls reserved, cost reserved, of which in flight; nano-dollars) of the update."""
    u = prompt_update
    row = conn.execute(
        select(u.c.calls_reserved, u.c.cost_reserved_nanousd, u.c.cost_in_flight_nanousd).where(u.c.id == update_id)
    ).first()
    return (int(row[0] or 0), int(row[1] or 0), int(row[2] or 0)) if row else (0, 0, 0)


# --- the gate config's limits: -------------------------------------------------------------------


def list_limits(conn: Connection) -> dict[str, str]:
    return {r.name: r.value for r in conn.execute(select(gate_limit).order_by(gate_limit.c.name))}


def set_limit(conn: Connection, name: str, value: str) -> bool:
    """Set (or change) one limit; True when it was not set."""
    return update_or_insert(conn, gate_limit, {"name": name}, {"value": value, "updated_at": db_now()})


def delete_limit(conn: Connection, name: str) -> bool:
    return conn.execute(delete(gate_limit).where(gate_limit.c.name == name)).rowcount > 0


# --- counters that only grow (/metrics) ----------------------------------------------------------


def add_counters(conn: Connection, amounts: dict[str, int]) -> None:
    """Add to the named counters (creating them), in the caller's transaction."""
    c = gate_counter
    for name, amount in sorted(amounts.items()):  # one key order: no deadlock
        bump = update(c).where(c.c.name == name).values(value=c.c.value + int(amount))
        if not amount or conn.execute(bump).rowcount:
            continue
        try:
            with conn.begin_nested():
                conn.execute(insert(c).values(name=name, value=int(amount)))
        except IntegrityError:  # another finalizer made it a moment ago: add to it
            conn.execute(bump)


def read_counters(conn: Connection, names: Sequence[str]) -> dict[str, int]:
    found = {
        r.name: int(r.value) for r in conn.execute(select(gate_counter).where(gate_counter.c.name.in_(list(names))))
    }
    return {name: found.get(name, 0) for name in names}
