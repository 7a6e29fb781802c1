"""SQL that MySQL/MariaDB and SQLite spell differently, as SQLAlchemy function elements
compiled per dialect: the database clock (``db_now``), ``seconds_since``, and the
two-argument ``least``/``greatest`` and ``floor_div`` the rate-limit UPDATEs use.

Time is the database server's (UTC) on MySQL, so leases agree across machines; SQLite is
one machine, and its clock is the process's."""

from __future__ import annotations

from sqlalchemy import Float, Integer, String, insert, literal, update
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement, FunctionElement
from sqlalchemy.types import DateTime

SQLITE_TIME_FORMAT = "%Y-%m-%d %H:%M:%f000"  # microsecond-width text that sorts as time


class db_now(FunctionElement):
    """The current UTC time on the database server, optionally plus ``seconds``."""

    type = DateTime()
    inherit_cache = True

    def __init__(self, seconds: ColumnElement | float | None = None):
        self.seconds = seconds
        args = () if seconds is None else (seconds if isinstance(seconds, ColumnElement) else literal(float(seconds)),)
        super().__init__(*args)


@compiles(db_now, "mysql")
def _now_mysql(element, compiler, **kw):
    args = list(element.clauses)
    if not args:
        return "UTC_TIMESTAMP(6)"
    return (
        f"TIMESTAMPADD(MICROSECOND, CAST(ROUND(({compiler.process(args[0], **kw)}) * 1000000) "
        f"AS SIGNED), UTC_TIMESTAMP(6))"
    )


@compiles(db_now, "sqlite")
def _now_sqlite(element, compiler, **kw):
    args = list(element.clauses)
    if not args:
        return f"strftime('{SQLITE_TIME_FORMAT}', 'now')"
    return f"strftime('{SQLITE_TIME_FORMAT}', 'now', printf('%+.6f seconds', {compiler.process(args[0], **kw)}))"


class seconds_since(FunctionElement):
    """Seconds from a time column to the database's now (negative when it lies ahead)."""

    type = Float()
    inherit_cache = True
    name = "seconds_since"


@compiles(seconds_since, "mysql")
def _seconds_since_mysql(element, compiler, **kw):
    (arg,) = list(element.clauses)
    return f"(TIMESTAMPDIFF(MICROSECOND, {compiler.process(arg, **kw)}, UTC_TIMESTAMP(6)) * 1e-6)"


@compiles(seconds_since, "sqlite")
def _seconds_since_sqlite(element, compiler, **kw):
    (arg,) = list(element.clauses)
    return f"((julianday('now') - julianday({compiler.process(arg, **kw)})) * 86400.0)"


class least(FunctionElement):
    """LEAST(a, b) on MySQL, the two-argument min(a, b) on SQLite."""

    inherit_cache = True
    name = "least"

    def __init__(self, a, b):
        super().__init__(a, b)
        self.type = a.type


class greatest(least):
    """GREATEST(a, b) on MySQL, the two-argument max(a, b) on SQLite."""

    inherit_cache = True
    name = "greatest"


@compiles(least, "mysql")
@compiles(greatest, "mysql")
def _extreme_mysql(element, compiler, **kw):
    return f"{element.name.upper()}({compiler.process(element.clauses, **kw)})"


class floor_div(FunctionElement):
    """FLOOR(a / b) for non-negative a and positive b, as an integer."""

    inherit_cache = True
    name = "floor_div"
    type = Integer()


@compiles(floor_div, "mysql")
def _floor_div_mysql(element, compiler, **kw):
    a, b = list(element.clauses)
    return f"FLOOR({compiler.process(a, **kw)} / {compiler.process(b, **kw)})"


@compiles(floor_div, "sqlite")
def _floor_div_sqlite(element, compiler, **kw):
    a, b = list(element.clauses)
    return f"CAST({compiler.process(a, **kw)} / {compiler.process(b, **kw)} AS INTEGER)"


@compiles(least, "sqlite")
@compiles(greatest, "sqlite")
def _extreme_sqlite(element, compiler, **kw):
    return f"{'min' if element.name == 'least' else 'max'}({compiler.process(element.clauses, **kw)})"


def update_or_insert(conn, table, key: dict, values: dict) -> bool:
    """Set ``values`` on the row of ``table`` at ``key``, inserting it when there is none
    (portable: no dialect's upsert). Returns True when inserted. Callers hold what makes it
    safe against a concurrent insert of the same key (the gate config's sync, a lock)."""
    where = [table.c[column] == value for column, value in key.items()]
    if conn.execute(update(table).where(*where).values(**values)).rowcount:
        return False
    conn.execute(insert(table).values(**key, **values))
    return True


class json_text(FunctionElement):
    """A top-level key of a JSON text column as SQL text (NULL when absent, null, an object
    or a list), alike on both: ``JSON_VALUE`` on MySQL/MariaDB, ``json_extract`` on SQLite,
    booleans spelled ``true``/``false`` on both. The key is a field or column name the
    caller has checked (it is quoted into the path); a row whose text is not JSON must be
    filtered out first (SQLite raises on it)."""

    type = String()
    inherit_cache = True
    name = "json_text"

    def __init__(self, column, key: str):
        if '"' in key or "\\" in key:
            raise ValueError(f"not a JSON key the gate addresses: {key!r}")
        super().__init__(column, literal(f'$."{key}"'))


@compiles(json_text, "mysql")
def _json_text_mysql(element, compiler, **kw):
    column, path = (compiler.process(c, **kw) for c in element.clauses)
    # JSON_VALUE reads a boolean as 1/0: its JSON text instead, as SQLite's is spelled
    return (
        f"(CASE JSON_TYPE(JSON_EXTRACT({column}, {path})) WHEN 'BOOLEAN' THEN JSON_EXTRACT({column}, {path}) "
        f"ELSE JSON_VALUE({column}, {path}) END)"
    )


@compiles(json_text, "sqlite")
def _json_text_sqlite(element, compiler, **kw):
    column, path = (compiler.process(c, **kw) for c in element.clauses)
    return (
        f"(CASE json_type({column}, {path}) WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' "
        f"WHEN 'text' THEN json_extract({column}, {path}) WHEN 'integer' THEN CAST(json_extract({column}, {path}) "
        f"AS TEXT) WHEN 'real' THEN CAST(json_extract({column}, {path}) AS TEXT) ELSE NULL END)"
    )
