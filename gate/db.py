"""Engines, transactions, and the migration runner.

MySQL/MariaDB sessions run at READ COMMITTED; SQLite runs every transaction as
``BEGIN IMMEDIATE`` so that claims serialize where SKIP LOCKED is not available.
The database clock the statements use (``db_now``) is in ``gate.store.dialect``.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import re
import time
from importlib import resources

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError
from sqlalchemy.pool import QueuePool

from gate.errors import MigrationError, UsageError, first_line

log = logging.getLogger("promptgate.db")


def normalize_url(url: str) -> str:
    """Accept mysql://, mariadb:// and mysql+pymysql://; always use PyMySQL."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UsageError(
            f"not a database URL: {url!r} (e.g. sqlite:///promptgate.db or mysql://user:pass@host/db)"
        ) from None
    backend = parsed.get_backend_name()
    if backend in ("mysql", "mariadb"):
        parsed = parsed.set(drivername="mysql+pymysql")
        query = dict(parsed.query)
        query.setdefault("charset", "utf8mb4")
        parsed = parsed.set(query=query)
    elif backend != "sqlite":
        raise UsageError(f"unsupported database {backend!r}: use MySQL/MariaDB or SQLite")
    return parsed.render_as_string(hide_password=False)


IDLE_TRANSACTION_SECONDS = 120


def make_engine(url: str, pool_size: int = 10, idle_transaction_seconds: int = IDLE_TRANSACTION_SECONDS) -> Engine:
    url = normalize_url(url)
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 60, "check_same_thread": False})
        _sqlite_immediate(engine)
        return engine
    engine = create_engine(
        url,
        isolation_level="READ COMMITTED",
        pool_pre_ping=True,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_recycle=3600,
    )
    _bound_idle_transactions(engine, idle_transaction_seconds)
    _share_preferred_tls_context(engine)
    return engine


def _share_preferred_tls_context(engine: Engine) -> None:
    """Every connection of the process shares one TLS context when the URL sets no TLS
    options. PyMySQL then offers TLS as "preferred": unverified (its context has no CA to
    check against), falling back to plain when the server has none; yet it built that
    context per connection with ``ssl.create_default_context()``, which loads the system's
    CA store: ~30 ms of CPU for every connection, read by nothing. A worker warming its
    pool paid it ten times over, each CLI command once, the test suite thousands of times.
    The context shared is the one PyMySQL builds, built once: the same TLS on the wire."""

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect, _record, cargs, cparams):
        from gate.mysql_tls import PreferredTLSConnection

        return PreferredTLSConnection(*cargs, **cparams)


def _bound_idle_transactions(engine: Engine, seconds: int) -> None:
    """On MariaDB, a session left idle inside a transaction for ``seconds`` is ended by the
    server (``idle_transaction_timeout``), which rolls it back and frees its row locks.

    Every transaction of the gate is a few statements long and never waits on anything
    but the database, so only a frozen process (SIGSTOP, a paused VM, a debugger) leaves
    one idle. Without the bound, a worker frozen inside finalize's or reconcile's brief row
    lock would keep that run or update locked until its connection died: the other
    workers' SKIP LOCKED claims pass over it and it never ends. MySQL has no such
    setting; there the lock lasts until the connection dies (wait_timeout)."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):
        if "mariadb" in str(dbapi_conn.get_server_info()).lower():
            with dbapi_conn.cursor() as cur:
                cur.execute(f"SET SESSION idle_transaction_timeout = {int(seconds)}")


def warm_pool(engine: Engine, connections: int) -> None:
    """Open ``connections`` pooled connections at once and return them to the pool."""
    if is_sqlite(engine):
        return
    held = []
    pool = engine.pool
    assert isinstance(pool, QueuePool)  # a server database's engine: create_engine's default pool
    try:
        for _ in range(min(connections, pool.size())):
            held.append(engine.connect())
    finally:
        for conn in held:
            conn.close()


class KeptConnection:
    """Small statements in a loop (a probe, a status poll, a heartbeat) on one connection
    kept in autocommit: one statement each, where a pool checkout adds a ping and a
    ROLLBACK. A failed statement drops the connection (the next one opens a fresh one)
    and raises. On SQLite, whose BEGIN IMMEDIATE would hold the write lock, each call runs
    in a short transaction of its own."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.conn: Connection | None = None

    def run(self, fn):
        if is_sqlite(self.engine):
            with self.engine.begin() as conn:  # no retry here: callers run it again on their next beat or poll
                return fn(conn)
        try:
            if self.conn is None:
                self.conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            return fn(self.conn)
        except DBAPIError:
            self.close()
            raise

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.invalidate()
                self.conn.close()
            except Exception:
                pass
            self.conn = None


def _sqlite_immediate(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=60000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn):
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def is_sqlite(bind) -> bool:
    return bind.dialect.name == "sqlite"


# --- transactions: the one retry policy -----------------------------------------------

# MySQL/MariaDB errors after which the same transaction, run again from scratch, can
# succeed. Conflicts (the server rolled the work back): deadlock victim, lock wait timeout.
CONFLICT_CODES = {1213, 1205}
# The connection is gone or the server unreachable (restarting, failing over): can't
# connect, server has gone away, lost connection during a query, lost connection (system
# error), connection killed (MariaDB), disconnected by the server (MySQL 8).
LOST_CONNECTION_CODES = {2003, 2006, 2013, 2055, 1927, 4031}
RETRY_ATTEMPTS = 12  # runs of one transaction at most
RETRY_GIVE_UP_AFTER = 20.0  # seconds: no new run starts later than this after the first
RETRY_FIRST_DELAY = 0.01  # seconds before the second run; doubling, with jitter
RETRY_MAX_DELAY = 2.0  # the longest wait between two runs


def is_retryable(exc: BaseException) -> bool:
    """Whether running the failed transaction again, from scratch on a fresh connection, can
    succeed: a lock conflict (MySQL deadlock 1213 or lock wait timeout 1205, SQLite
    "database is locked") or a lost connection (server gone away, connection lost or
    killed, server unreachable, or any error after which SQLAlchemy invalidated the
    connection). Anything else is an answer, not an accident: retrying cannot change it."""
    return _is_conflict(exc) or _is_lost_connection(exc)


def _is_conflict(exc: BaseException) -> bool:
    return isinstance(exc, OperationalError) and (
        error_code(exc.orig) in CONFLICT_CODES or "database is locked" in str(exc.orig)
    )


def _is_lost_connection(exc: BaseException) -> bool:
    return isinstance(exc, DBAPIError) and (exc.connection_invalidated or error_code(exc.orig) in LOST_CONNECTION_CODES)


def error_code(orig: BaseException | None) -> int | None:
    """The MySQL/MariaDB error number of a driver error (None: not one)."""
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], Exception):  # PyMySQL may wrap the server's error
        args = args[0].args
    return args[0] if args and isinstance(args[0], int) else None


def transaction_retry_delay(attempt: int) -> float:
    """Seconds to wait after run ``attempt`` (1, 2, ...) failed: exponential backoff from
    RETRY_FIRST_DELAY up to RETRY_MAX_DELAY, each wait drawn from its upper half so that
    transactions that collided do not collide again in step."""
    ceiling = min(RETRY_MAX_DELAY, RETRY_FIRST_DELAY * 2 ** (attempt - 1))
    return random.uniform(ceiling / 2, ceiling)


def transaction(
    engine: Engine, work, *, wrote=None, attempts: int = RETRY_ATTEMPTS, give_up_after: float = RETRY_GIVE_UP_AFTER
):
    """Run ``work(conn)`` in one transaction and return its result: how the gate writes.

    A retryable failure (``is_retryable``: a deadlock victim, a lock wait timeout, a lost
    connection) rolls back and runs ``work`` again from scratch in a new transaction on a
    fresh connection, after ``transaction_retry_delay``; at most ``attempts`` runs, and none started
    later than ``give_up_after`` seconds after the first. Then, or at once for any other
    error, the error is raised. So ``work`` must be the whole transaction and have no
    effects outside the database that a second run would repeat. A connection lost during
    COMMIT leaves it unknown whether the first run committed: a second run must be safe
    on top of a committed first one (lease-token guards, conditional UPDATEs, and
    ``Materializer.copy_page``'s check that its page is not in already, make it so).

    ``wrote(result)``, when given, says whether the work wrote anything: a poll that
    claimed nothing rolls back instead of committing, so an idle-ish fleet polling for
    work costs no COMMITs (the P3 benchmark counts them)."""
    deadline = time.monotonic() + give_up_after
    for attempt in range(1, attempts + 1):
        try:
            with engine.connect() as conn, conn.begin() as tx:
                result = work(conn)
                if wrote is not None and not wrote(result):
                    tx.rollback()
                return result
        except Exception as exc:
            delay = transaction_retry_delay(attempt)
            if attempt == attempts or not is_retryable(exc) or time.monotonic() + delay > deadline:
                raise
            log.log(
                logging.DEBUG if _is_conflict(exc) else logging.WARNING,
                "database error in transaction run %d, running it again in %.3fs: %s",
                attempt,
                delay,
                first_line(exc),
            )
            time.sleep(delay)


def read(engine: Engine, work):
    """``work(conn)`` under the retry policy of ``transaction``, for reads: it ends in a
    rollback, so it costs no COMMIT (P3 counts them; a read per chunk in a transaction that
    committed took P3 from 0.066 to 0.099 commits per item)."""
    return transaction(engine, work, wrote=lambda _result: False)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


# --- migrations -----------------------------------------------------------------

MIGRATION_TABLE = "schema_migration"
MIGRATION_LOCK = "promptgate_migrate"


def migrations(dialect: str) -> list[tuple[int, str, str]]:
    """(version, name, sql) of every migration shipped for a dialect, in order."""
    folder = _sql_folder().joinpath("mysql" if dialect == "mysql" else "sqlite")
    found = []
    for entry in folder.iterdir():
        match = re.match(r"^(\d+)_(.+)\.sql$", entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    return sorted(found)


def _sql_folder():
    """``sql/`` ships inside the wheel as ``gate.sql``; in a source checkout it sits beside ``gate/``."""
    try:
        return resources.files("gate.sql")
    except ModuleNotFoundError:
        from pathlib import Path

        return Path(__file__).resolve().parent.parent / "sql"


def split_statements(sql: str) -> list[str]:
    body = "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]


def upgrade(engine: Engine) -> list[int]:
    """Apply pending migrations in order and record them. Idempotent, and safe when
    several processes run it at once (MySQL: a named lock; SQLite: BEGIN IMMEDIATE)."""
    dialect = engine.dialect.name
    with engine.connect() as conn:
        if dialect == "mysql":
            got = conn.execute(text("SELECT GET_LOCK(:n, 120)"), {"n": MIGRATION_LOCK}).scalar()
            if got != 1:
                raise MigrationError("another process holds the migration lock for over 120 s")
            try:
                return _apply_pending(conn, dialect)
            finally:
                conn.execute(text("SELECT RELEASE_LOCK(:n)"), {"n": MIGRATION_LOCK})
                conn.commit()
        with conn.begin():  # not db.transaction: a failed migration stops the upgrade, to be looked at
            return _apply_pending(conn, dialect)


def _apply_pending(conn: Connection, dialect: str) -> list[int]:
    conn.execute(
        text(
            f"CREATE TABLE IF NOT EXISTS {MIGRATION_TABLE} (version INT NOT NULL PRIMARY KEY, "
            f"name VARCHAR(255) NOT NULL, applied_at VARCHAR(32) NOT NULL)"
        )
    )
    if dialect == "mysql":
        conn.commit()
    done = {row[0] for row in conn.execute(text(f"SELECT version FROM {MIGRATION_TABLE}"))}
    applied = []
    for version, name, sql in migrations(dialect):
        if version in done:
            continue
        try:
            for statement in split_statements(sql):
                _run_migration_statement(conn, statement, dialect)
            conn.execute(
                text(f"INSERT INTO {MIGRATION_TABLE} (version, name, applied_at) VALUES (:v, :n, :t)"),
                {"v": version, "n": name, "t": utcnow().isoformat()},
            )
            if dialect == "mysql":
                conn.commit()
        except Exception as exc:
            raise MigrationError(f"migration {version:04d}_{name} failed: {exc}") from exc
        applied.append(version)
    return applied


# MySQL commits each DDL statement, so a migration that stopped half-way (a lost
# connection, a killed session, a full disk) has some statements in already. Run again, a
# statement whose effect is there fails with one of these, and is skipped: table exists,
# duplicate column, duplicate key name, key or column not there to drop, primary key
# defined already.
ALREADY_APPLIED_MYSQL = {1050, 1060, 1061, 1091, 1068}


def _run_migration_statement(conn: Connection, statement: str, dialect: str) -> None:
    if dialect != "mysql":
        conn.execute(text(statement))  # SQLite: the whole migration is one transaction
        return
    try:
        conn.execute(text(statement))
    except DBAPIError as exc:
        code = exc.orig.args[0] if exc.orig is not None and exc.orig.args else None
        if code not in ALREADY_APPLIED_MYSQL:
            raise
        assert exc.orig is not None  # the code was read from it
        log.warning(
            "migration statement already applied, skipped: %s (%s)", statement.split("\n")[0][:80], first_line(exc.orig)
        )


def pending_versions(engine: Engine) -> list[int]:
    """The shipped migrations not applied yet, by version: ``upgrade`` applies by this set,
    so one numbered below the highest applied (merged later) is pending too."""
    with engine.connect() as conn:
        try:
            done: set[int] = set(conn.execute(text(f"SELECT version FROM {MIGRATION_TABLE}")).scalars())
        except Exception:
            done = set()
    return [v for v, _, _ in migrations(engine.dialect.name) if v not in done]


def current_version(engine: Engine) -> int:
    with engine.connect() as conn:
        try:
            return conn.execute(text(f"SELECT MAX(version) FROM {MIGRATION_TABLE}")).scalar() or 0
        except Exception:
            return 0
