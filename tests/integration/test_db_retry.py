"""``gate.db.transaction``, the one retry policy of every write: a retryable failure (a lock
conflict, a lost connection) rolls back and runs the work again from scratch; any other
error raises at once; runs are bounded in number and in time. On MariaDB, a session killed
between two statements of a transaction is run again on a fresh connection."""

from __future__ import annotations

import sqlite3
import time

import pymysql
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError, ProgrammingError

from gate import db


def _mysql_error(cls, code: int, message: str):
    kind = {
        OperationalError: pymysql.err.OperationalError,
        ProgrammingError: pymysql.err.ProgrammingError,
        IntegrityError: pymysql.err.IntegrityError,
        InterfaceError: pymysql.err.InterfaceError,
    }[cls]
    return cls("UPDATE t SET v = 1", {}, kind(code, message))


def _deadlock():
    return _mysql_error(OperationalError, 1213, "Deadlock found when trying to get lock; try restarting transaction")


@pytest.fixture
def engine(tmp_path):
    engine = db.make_engine(f"sqlite:///{tmp_path / 'retry.db'}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"))
    yield engine
    engine.dispose()


def _rows(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(text("SELECT COUNT(*) FROM t")).scalar()


def test_a_deadlock_is_rolled_back_and_run_again(engine):
    runs = []

    def work(conn):
        runs.append(1)
        conn.execute(text("INSERT INTO t (v) VALUES ('x')"))
        if len(runs) < 3:
            raise _deadlock()
        return "done"

    assert db.transaction(engine, work) == "done"
    assert len(runs) == 3
    assert _rows(engine) == 1  # the two failed runs rolled back


@pytest.mark.parametrize(
    "error",
    [
        lambda: _mysql_error(IntegrityError, 1062, "Duplicate entry '1' for key 'PRIMARY'"),
        lambda: _mysql_error(ProgrammingError, 1064, "You have an error in your SQL syntax"),
        lambda: _mysql_error(OperationalError, 1054, "Unknown column 'x' in 'field list'"),
        lambda: ValueError("a bug"),
    ],
    ids=["duplicate key", "syntax", "unknown column", "not a database error"],
)
def test_a_non_retryable_error_raises_at_once(engine, error):
    runs = []

    def work(conn):
        runs.append(1)
        conn.execute(text("INSERT INTO t (v) VALUES ('x')"))
        raise error()

    with pytest.raises(type(error())):
        db.transaction(engine, work)
    assert len(runs) == 1
    assert _rows(engine) == 0


def test_runs_are_bounded_in_number(engine):
    runs = []

    def work(conn):
        runs.append(1)
        raise _deadlock()

    with pytest.raises(OperationalError, match="Deadlock"):
        db.transaction(engine, work, attempts=4)
    assert len(runs) == 4


def test_runs_are_bounded_in_time(engine, monkeypatch):
    monkeypatch.setattr(db, "transaction_retry_delay", lambda attempt: 0.05)
    runs = []

    def work(conn):
        runs.append(1)
        raise _mysql_error(OperationalError, 2013, "Lost connection to MySQL server during query")

    started = time.monotonic()
    with pytest.raises(OperationalError, match="Lost connection"):
        db.transaction(engine, work, attempts=1000, give_up_after=0.3)
    assert time.monotonic() - started < 1.0
    assert 2 <= len(runs) <= 7


def test_a_lost_connection_is_run_again_like_a_conflict(engine):
    runs = []

    def work(conn):
        runs.append(1)
        if len(runs) == 1:
            raise _mysql_error(OperationalError, 2006, "MySQL server has gone away")
        conn.execute(text("INSERT INTO t (v) VALUES ('x')"))

    db.transaction(engine, work)
    assert (len(runs), _rows(engine)) == (2, 1)


@pytest.mark.parametrize(
    "error, retryable",
    [
        (_deadlock(), True),
        (_mysql_error(OperationalError, 1205, "Lock wait timeout exceeded; try restarting transaction"), True),
        (_mysql_error(OperationalError, 2006, "MySQL server has gone away"), True),
        (_mysql_error(OperationalError, 2013, "Lost connection to MySQL server during query"), True),
        (_mysql_error(OperationalError, 2003, "Can't connect to MySQL server on '127.0.0.1'"), True),
        (_mysql_error(OperationalError, 1927, "Connection was killed"), True),
        (OperationalError("BEGIN IMMEDIATE", {}, sqlite3.OperationalError("database is locked")), True),
        (DBAPIError("SELECT 1", {}, pymysql.err.InterfaceError(0, ""), connection_invalidated=True), True),
        (_mysql_error(IntegrityError, 1062, "Duplicate entry"), False),
        (_mysql_error(ProgrammingError, 1146, "Table 'x' doesn't exist"), False),
        (_mysql_error(OperationalError, 1054, "Unknown column"), False),
        (OperationalError("SELECT 1", {}, sqlite3.OperationalError("no such table: t")), False),
        (RuntimeError("database is locked"), False),
    ],
    ids=[
        "deadlock",
        "lock wait",
        "gone away",
        "lost",
        "can't connect",
        "killed",
        "sqlite locked",
        "invalidated",
        "duplicate",
        "no table",
        "unknown column",
        "sqlite no table",
        "not a database error",
    ],
)
def test_is_retryable(error, retryable):
    assert db.is_retryable(error) is retryable


def test_transaction_retry_delay_doubles_with_jitter_up_to_a_ceiling():
    for attempt in range(1, 20):
        ceiling = min(db.RETRY_MAX_DELAY, db.RETRY_FIRST_DELAY * 2 ** (attempt - 1))
        delays = [db.transaction_retry_delay(attempt) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1


def test_a_killed_session_is_run_again_on_a_fresh_connection(mysql_url):
    """The work's connection is killed by the server (``KILL``, from another connection)
    between its two statements: the transaction runs again from scratch on a fresh
    connection, and only the second run's write is there."""
    engine = db.make_engine(mysql_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE retry_probe (id INT AUTO_INCREMENT PRIMARY KEY, session BIGINT)"))
        sessions = []

        def work(conn):
            session = conn.execute(text("SELECT CONNECTION_ID()")).scalar()
            sessions.append(session)
            if len(sessions) == 1:
                with engine.connect() as other:
                    other.execute(text(f"KILL {int(session)}"))
            conn.execute(text("INSERT INTO retry_probe (session) VALUES (:s)"), {"s": session})
            return session

        assert db.transaction(engine, work) == sessions[-1]
        assert len(sessions) == 2 and sessions[0] != sessions[1]
        with engine.connect() as conn:
            assert conn.execute(text("SELECT session FROM retry_probe")).scalars().all() == [sessions[1]]
    finally:
        engine.dispose()
