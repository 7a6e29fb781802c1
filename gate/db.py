"""Engines, transactions, and the migration runner.

MySQL/MariaDB sessions run at READ COMMITTED; SQLite runs every transaction as
``BEGIN IMMEDIATE`` so that claims serialize where SKIP LOCKED is not available.
The database clock the statements use (``db_now``) is in ``gate.store.dialect``.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from importlib import resources

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

from .errors import MigrationError, UsageError


def normalize_url(url: str) -> str:
    """Accept mysql://, mariadb:// and mysql+pymysql://; always use PyMySQL."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UsageError(f"not a database URL: {url!r} (e.g. sqlite:///promptgate.db or "
                         "mysql://user:pass@host/db)") from None
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
    engine = create_engine(url, isolation_level="READ COMMITTED", pool_pre_ping=True,
                           pool_size=pool_size, max_overflow=pool_size, pool_recycle=3600)
    _bound_idle_transactions(engine, idle_transaction_seconds)
    return engine


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
    try:
        for _ in range(min(connections, engine.pool.size())):
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
            with self.engine.begin() as conn:
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
        dbapi_conn.isolation_level = None          # we issue BEGIN ourselves
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


# MySQL/MariaDB: deadlock victim, lock wait timeout. SQLite: busy past its timeout.
CONFLICT_CODES = {1213, 1205}


def is_conflict(exc: BaseException) -> bool:
    from sqlalchemy.exc import OperationalError
    if not isinstance(exc, OperationalError):
        return False
    args = getattr(exc.orig, "args", ())
    return (bool(args) and args[0] in CONFLICT_CODES) or "database is locked" in str(exc.orig)


def transaction(engine: Engine, work, attempts: int = 6, *, wrote=None):
    """Run ``work(conn)`` in one transaction; a deadlock victim is rolled back and run
    again (InnoDB picks victims under concurrency: that is a retry, not an error).

    ``wrote(result)``, when given, says whether the work wrote anything: a poll that
    claimed nothing rolls back instead of committing, so an idle-ish fleet polling for
    work costs no COMMITs (the P3 benchmark counts them)."""
    import random
    for attempt in range(attempts):
        try:
            with engine.connect() as conn, conn.begin() as tx:
                result = work(conn)
                if wrote is not None and not wrote(result):
                    tx.rollback()
                return result
        except Exception as exc:
            if attempt == attempts - 1 or not is_conflict(exc):
                raise
            time.sleep(random.uniform(0.005, 0.02) * 2 ** attempt)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


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
        with conn.begin():
            return _apply_pending(conn, dialect)


def _apply_pending(conn: Connection, dialect: str) -> list[int]:
    conn.execute(text(f"CREATE TABLE IF NOT EXISTS {MIGRATION_TABLE} (version INT NOT NULL PRIMARY KEY, "
                      f"name VARCHAR(255) NOT NULL, applied_at VARCHAR(32) NOT NULL)"))
    if dialect == "mysql":
        conn.commit()
    done = {row[0] for row in conn.execute(text(f"SELECT version FROM {MIGRATION_TABLE}"))}
    applied = []
    for version, name, sql in migrations(dialect):
        if version in done:
            continue
        try:
            for statement in split_statements(sql):
                conn.execute(text(statement))
            conn.execute(text(f"INSERT INTO {MIGRATION_TABLE} (version, name, applied_at) VALUES (:v, :n, :t)"),
                         {"v": version, "n": name, "t": utcnow().isoformat()})
            if dialect == "mysql":
                conn.commit()
        except Exception as exc:
            raise MigrationError(f"migration {version:04d}_{name} failed: {exc}") from exc
        applied.append(version)
    return applied


def latest_version(dialect: str) -> int:
    return max((v for v, _, _ in migrations(dialect)), default=0)


def current_version(engine: Engine) -> int:
    with engine.connect() as conn:
        try:
            return conn.execute(text(f"SELECT MAX(version) FROM {MIGRATION_TABLE}")).scalar() or 0
        except Exception:
            return 0


def wait_for_database(engine: Engine, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
