"""The price table the gate config declares (``prices:``): one row per model."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection

from gate.records import Price

from .dialect import db_now, update_or_insert
from .schema import model_price


def _price(row) -> Price:
    return Price(row.model, Decimal(row.input_per_million), Decimal(row.output_per_million))


def list_prices(conn: Connection) -> dict[str, Price]:
    return {r.model: _price(r) for r in conn.execute(select(model_price).order_by(model_price.c.model))}


def find_price(conn: Connection, model: str) -> Price | None:
    row = conn.execute(select(model_price).where(model_price.c.model == model)).first()
    return _price(row) if row is not None else None


def upsert_price(conn: Connection, price: Price) -> bool:
    """Set a model's price, or change it. Returns True when created."""
    values = {
        "input_per_million": f"{price.input_per_million:f}",  # fixed point: never "1E-9"
        "output_per_million": f"{price.output_per_million:f}",
        "updated_at": db_now(),
    }
    return update_or_insert(conn, model_price, {"model": price.model}, values)


def delete_price(conn: Connection, model: str) -> bool:
    return conn.execute(delete(model_price).where(model_price.c.model == model)).rowcount > 0
