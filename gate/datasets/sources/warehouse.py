"""A SQL warehouse: any SQLAlchemy database URL plus a SELECT, read by keyset pages.

URI form: ``sql+`` followed by a SQLAlchemy URL whose query string carries ``query``
(the SELECT, URL-encoded) or ``query_file`` (a .sql file, relative to the gate config's
folder)::

    sql+sqlite:////data/labels.db?query=SELECT+id+AS+item_id,+label+AS+expected_decision,+body+FROM+tickets
    sql+sqlite:///labels.db?query_file=queries/support.sql
    sql+postgresql://reader:${PG_PASSWORD}@warehouse.internal:5432/analytics?sslmode=require&query=SELECT...
    sql+mysql+pymysql://reader:${MYSQL_PASSWORD}@db/labels?query=SELECT...

- ``${VAR}`` in the user, password, host, database or driver options is replaced by the
  environment variable ``VAR`` when the source is opened: credentials live in the
  environment, never in the database (the URI is stored as written, placeholders and all).
  The SQL text itself is never expanded, and nothing is when the service reads the
  source for a caller (``SourceOptions.expand_env`` off; see ``warehouse_net.py``).
- Every parameter other than ``query`` / ``query_file`` goes to the driver (``sslmode``...).
- The query must return the id column (default ``item_id``) and the label column
  (default ``expected_decision``), or the columns named by ``--id-column`` /
  ``--label-column``; every other column goes into the item's ``input``. Alias in SQL:
  ``SELECT ticket_id AS item_id, verdict AS expected_decision, subject, body FROM ...``.
- The driver must be installed (``psycopg`` for postgresql://, ``pymysql`` ships with the gate).
- ``PROMPTGATE_SOURCE_TIMEOUT`` (or ``options.extra["timeout"]``, seconds, default 30) bounds
  connecting and each read (MySQL/MariaDB: ``read_timeout``, so one statement; PostgreSQL:
  ``connect_timeout`` and ``statement_timeout``): raise it for a slow warehouse query.

Pages are keyset pages on the id column: the query is wrapped as a subquery,
``SELECT * FROM (<query>) AS src WHERE src.item_id > :cursor ORDER BY src.item_id LIMIT :n``
(each dialect's own LIMIT form), so the ids must be unique and not NULL; the reader checks
both (a NULL id or a repeated id is an error naming it). The cursor is the last id read,
JSON-encoded so it keeps its type. Each page is its own short read; for a stable result,
query a table or view that does not change while the run materializes.

``snapshot_version()`` is ``query:<sha256 of the query text>;rows=<row count>``
(one ``COUNT(*)`` over the query, also used to find NULL ids).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.errors import DatasetError, first_line

from .base import Page, SourceOptions, make_row, register, shown_source
from .http import expand_env, source_timeout
from .warehouse_net import failure_kind, for_service, timeouts

if TYPE_CHECKING:
    from sqlalchemy import Select

RESERVED_PARAMS = ("query", "query_file")


def _jsonable(value: Any) -> Any:
    """A column value as something JSON can carry (the item's input is stored as JSON)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, decimal.Decimal):
        if value == value.to_integral_value() and abs(value) < 1 << 63:
            return int(value)
        return float(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(data).decode("ascii")
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    return str(value)


def encode_cursor(value: Any) -> str:
    if value is None or isinstance(value, (str, int, float, bool)):
        return json.dumps(value)
    if isinstance(value, decimal.Decimal):
        return json.dumps({"$decimal": str(value)})
    if isinstance(value, dt.datetime):
        return json.dumps({"$datetime": value.isoformat()})
    if isinstance(value, dt.date):
        return json.dumps({"$date": value.isoformat()})
    if isinstance(value, uuid.UUID):
        return json.dumps({"$uuid": str(value)})
    if isinstance(value, (bytes, bytearray, memoryview)):
        return json.dumps({"$bytes": base64.b64encode(bytes(value)).decode("ascii")})
    return json.dumps(str(value))


def decode_cursor(cursor: str) -> Any:
    try:
        value = json.loads(cursor)
    except json.JSONDecodeError:
        raise DatasetError(f"invalid cursor {cursor!r} for a warehouse source") from None
    if isinstance(value, dict) and len(value) == 1:
        ((tag, text),) = value.items()
        decoders: dict[str, Callable[[str], object]] = {
            "$decimal": decimal.Decimal,
            "$datetime": dt.datetime.fromisoformat,
            "$date": dt.date.fromisoformat,
            "$uuid": uuid.UUID,
            "$bytes": base64.b64decode,
        }
        decode = decoders.get(tag)
        if decode:
            return decode(text)
    return value


def parse_warehouse_uri(uri: str, base_dir: str | None = None, expand: bool = True):
    """(SQLAlchemy URL with credentials expanded, query text) for a ``sql+...`` URI; with
    ``expand`` False (the service, for a caller) nothing is filled in from the environment
    and no query file is read: both are the operator's, never a caller's."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    if not uri.lower().startswith("sql+"):
        raise DatasetError(f"{uri}: a warehouse source starts with sql+ (e.g. sql+postgresql://...)")
    try:
        url = make_url(uri[len("sql+") :])
    except ArgumentError as exc:
        raise DatasetError(f"{uri}: not a SQLAlchemy database URL after 'sql+': {exc}") from None
    params = dict(url.query)
    query = _query_of(uri, params.pop("query", None), params.pop("query_file", None), base_dir, expand)
    url = _url_expanded(url, params, uri) if expand else url.set(query=params)
    if url.get_backend_name() == "sqlite":
        url = _sqlite_file(url, uri, base_dir)
    return url, query


def _query_of(uri: str, query: Any, query_file: Any, base_dir: str | None, expand: bool) -> str:
    """The URI's query, given as ``query=`` or (the operator's only) read from
    ``query_file=``, without its trailing semicolon; a SELECT, WITH or VALUES."""
    if isinstance(query, tuple) or isinstance(query_file, tuple):
        raise DatasetError(f"{uri}: give the query once")
    if query_file and not expand:
        raise DatasetError(
            "a sql+ source read for a caller of the service takes its query as query=, never "
            "query_file= (a file of the server's)"
        )
    if query_file:
        path = Path(query_file)
        if not path.is_absolute() and base_dir:
            path = Path(base_dir) / path
        try:
            query = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise DatasetError(f"{uri}: cannot read the query file {path}: {exc.strerror or exc}") from None
    if not query or not query.strip():
        raise DatasetError(f"{uri}: no query: add ?query=<URL-encoded SELECT> (or ?query_file=<file.sql>)")
    query = query.strip().rstrip(";").strip()
    match = re.match(r"[\s(]*(\w+)", query)
    first = match.group(1).lower() if match else query[:10]
    if first not in ("select", "with", "values"):
        raise DatasetError(f"{uri}: the query must be a SELECT (or WITH ... SELECT), not {first.upper()!r}")
    return query


def _url_expanded(url, params: dict, uri: str):
    """The URL with ``${VAR}`` in its user, password, host, database and driver options
    filled in from the environment."""

    def expand(value):
        if isinstance(value, tuple):
            return tuple(expand_env(v, uri) for v in value)
        return expand_env(value, uri) if isinstance(value, str) else value

    return url.set(
        username=expand(url.username),
        password=expand(url.password),
        host=expand(url.host),
        database=expand(url.database),
        query={k: expand(v) for k, v in params.items()},
    )


def _sqlite_file(url, uri: str, base_dir: str | None):
    """A SQLite source's database: a file that exists (relative to ``base_dir``), or a
    ``file:`` URI; never in memory."""
    database = url.database or ""
    if database in ("", ":memory:"):
        raise DatasetError(f"{uri}: an in-memory SQLite database holds no dataset: give a file path")
    if database.startswith("file:"):
        return url
    path = Path(database)
    if not path.is_absolute() and base_dir:
        path = Path(base_dir) / path
    if not path.is_file():
        raise DatasetError(f"{uri}: no such SQLite database file {path}")
    return url.set(database=str(path))


@register("sql")
class WarehouseReader:
    def __init__(self, uri: str, options: SourceOptions):
        from sqlalchemy import create_engine
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError

        self.uri = uri
        self.options = options
        self.url, self.query = parse_warehouse_uri(uri, options.base_dir, options.expand_env)
        self.display = "sql+" + self.url.render_as_string(hide_password=True)  # for messages
        if options.egress is not None:
            self.display = shown_source(uri)
        try:
            connect_args = timeouts(self.url, source_timeout(options))
            if options.egress is not None:  # read for a caller (warehouse_net)
                self.url, pinned = for_service(self.url, options.egress, self.display)
                connect_args.update(pinned)
            self.engine = create_engine(self.url, pool_pre_ping=True, connect_args=connect_args)
        except NoSuchModuleError:
            raise DatasetError(f"{uri}: SQLAlchemy has no dialect {self.url.drivername!r}") from None
        except ModuleNotFoundError as exc:
            raise DatasetError(
                f"{uri}: the database driver is not installed ({exc.name}): "
                f"pip install it, e.g. psycopg for postgresql://"
            ) from None
        except ArgumentError as exc:
            raise DatasetError(f"{uri}: invalid database URL: {exc}") from None
        self._stats: tuple[int, int] | None = None
        self._page_stmt = None
        self._first_stmt = None

    # -- statements -------------------------------------------------------------------
    def _subquery(self):
        from sqlalchemy import column, text

        return text(self.query).columns(column(self.options.id_column)).subquery("src")

    def _page(self, after: bool):
        from sqlalchemy import Integer, bindparam, literal_column, select

        src = self._subquery()
        key = src.c[self.options.id_column]
        stmt: Select[*tuple[Any, ...]] = select(literal_column("*")).select_from(src)
        if after:
            stmt = stmt.where(key > bindparam("cursor"))
        return stmt.order_by(key).limit(bindparam("n", type_=Integer(), literal_execute=True))

    def _run(self, stmt, **params):
        from sqlalchemy.exc import SQLAlchemyError

        try:
            with self.engine.connect() as conn:
                result = conn.execute(stmt, params)
                rows = [dict(row._mapping) for row in result]
                conn.rollback()
                return rows
        except SQLAlchemyError as exc:
            raise DatasetError(self._message(exc)) from None

    def _message(self, exc) -> str:
        if self.options.egress is not None:  # for a caller: the kind, never the driver's text
            return f"{self.display}: {failure_kind(exc)}"
        detail = first_line(exc, 1000)
        hint = ""
        lowered = detail.lower()
        if self.options.id_column.lower() in lowered and ("column" in lowered or "no such" in lowered):
            hint = (
                f" (the query must return a column named {self.options.id_column!r}: alias it, "
                f"e.g. SELECT id AS {self.options.id_column}, ...)"
            )
        return f"{self.display}: cannot run the query: {detail}{hint}"

    def _statistics(self) -> tuple[int, int]:
        if self._stats is None:
            from sqlalchemy import func, select

            src = self._subquery()
            stmt = select(func.count().label("n"), func.count(src.c[self.options.id_column]).label("ids"))
            row = self._run(stmt.select_from(src))[0]
            self._stats = (int(row["n"]), int(row["ids"]))
            missing = self._stats[0] - self._stats[1]
            if missing:
                raise DatasetError(
                    f"{self.display}: {missing} row(s) of the query have no item id "
                    f"(NULL in column {self.options.id_column!r})"
                )
        return self._stats

    # -- the reader interface ---------------------------------------------------------
    def snapshot_version(self) -> str:
        rows, _ = self._statistics()
        digest = hashlib.sha256(self.query.encode("utf-8")).hexdigest()
        return f"query:{digest};rows={rows}"

    def read_page(self, cursor: str | None, limit: int) -> Page:
        self._statistics()
        if cursor is None:
            if self._first_stmt is None:
                self._first_stmt = self._page(after=False)
            records = self._run(self._first_stmt, n=limit + 1)
        else:
            if self._page_stmt is None:
                self._page_stmt = self._page(after=True)
            records = self._run(self._page_stmt, cursor=decode_cursor(cursor), n=limit + 1)
        id_column = self.options.id_column
        if records and id_column not in records[0]:
            raise DatasetError(
                f"{self.display}: the query returns no column {id_column!r} (columns: {', '.join(records[0])})"
            )
        for before, after in zip(records, records[1:]):
            if before[id_column] == after[id_column]:
                raise DatasetError(
                    f"{self.display}: duplicate item id {after[id_column]!r}: the query "
                    f"returns it more than once (ids must be unique)"
                )
        more = len(records) > limit
        records = records[:limit]
        rows = []
        for record in records:
            key = record[id_column]
            position = f"item id {key!r}"
            rows.append(make_row({k: _jsonable(v) for k, v in record.items()}, position, self.options, self.display))
        next_cursor = encode_cursor(records[-1][id_column]) if more and records else None
        return Page(rows, next_cursor)

    def close(self) -> None:
        self.engine.dispose()
