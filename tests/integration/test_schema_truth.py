"""One schema truth (as procrastinate's migration tests keep theirs): each dialect's database
migrated from empty by `promptgate db upgrade` has exactly the tables of
``gate/store/schema.py``, with the same columns, types, nullability, server defaults,
primary keys, unique keys, indexes and foreign keys; and a database that lived through
every release (0001 only, with rows, then upgraded) ends the same as a fresh one.

What is compared, per dialect (each side read with SQLAlchemy's inspector, schema.py's
tables compiled for the dialect):

* Types on MariaDB: the type as MySQL DDL spells it (``BIGINT``, ``INTEGER``, ``TINYINT``,
  ``VARCHAR(n)``, ``CHAR(n)``, ``TEXT``, ``LONGTEXT``, ``DATETIME(6)``, ``DOUBLE``,
  ``DECIMAL(p, s)``), without the display widths MariaDB reports (``BIGINT(20)``).
* Types on SQLite: its storage class (the affinity of the declared type, by SQLite's own
  rules: "INT" → INTEGER, "CHAR"/"CLOB"/"TEXT" → TEXT, "REAL"/"FLOA"/"DOUB" → REAL, else
  NUMERIC) against the one SQLAlchemy's type stores there (integers INTEGER, strings, times
  and JSON TEXT, floats REAL), plus the declared length where the DDL gives one. SQLite
  stores BIGINT and INTEGER alike, so that difference is not one. A surrogate key must be
  declared exactly ``INTEGER PRIMARY KEY`` (the rowid: what numbers new rows).
* Unique keys: unique constraints and unique indexes alike (MySQL makes every UNIQUE KEY an
  index), by columns, and by name where the database gives one (SQLite names an inline
  ``UNIQUE`` ``sqlite_autoindex_...``: its name cannot be used, so it is not compared).
* Server defaults as values: quotes dropped, a time compared as a time.

``schema_migration`` is the migration runner's own table (gate/db.py) and not compared."""

from __future__ import annotations

import re
import uuid
from datetime import datetime

import pytest
from sqlalchemy import Float, Integer, String, UniqueConstraint, create_engine, inspect, text
from sqlalchemy.dialects import mysql as mysql_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.types import TypeDecorator
from support.mariadb_server import create_database

from gate import db
from gate.store import schema

RUNNER_TABLES = {db.MIGRATION_TABLE}
MYSQL = mysql_dialect.dialect()
SQLITE = sqlite_dialect.dialect()


# --- the shape of a database, as plain data ------------------------------------------------------


def default_value(value) -> str | None:
    if value is None:
        return None
    value = str(getattr(value, "text", value)).strip()
    if len(value) >= 2 and value[0] == value[-1] == "'":
        value = value[1:-1]
    try:
        return str(datetime.fromisoformat(value))
    except ValueError:
        return value


def affinity(declared: str) -> str:
    """SQLite's column affinity of a declared type (sqlite.org/datatype3.html, 3.1)."""
    upper = declared.upper()
    if "INT" in upper:
        return "INTEGER"
    if any(word in upper for word in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if not upper or "BLOB" in upper:
        return "BLOB"
    if any(word in upper for word in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


def sqlite_type(declared: str) -> str:
    length = re.search(r"\((\d+)\)", declared)
    return affinity(declared) + (f"({length.group(1)})" if length else "")


def mysql_type(spelled: str) -> str:
    spelled = re.sub(r"^(TINYINT|SMALLINT|MEDIUMINT|INTEGER|BIGINT)\(\d+\)", r"\1", spelled)
    return re.sub(r"\s+(COLLATE|CHARACTER SET)\s+\S+", "", spelled)


def declared_sqlite_type(column) -> str:
    """What SQLAlchemy's type of a schema.py column stores on SQLite, as ``sqlite_type`` spells it."""
    kind = column.type
    if isinstance(kind, TypeDecorator):
        kind = kind.load_dialect_impl(SQLITE)
    if isinstance(kind, Integer):
        return "INTEGER"
    if isinstance(kind, Float):
        return "REAL"
    length = getattr(kind, "length", None)
    return "TEXT" + (f"({length})" if isinstance(kind, String) and length else "")


def declared_shape(dialect: str) -> dict:
    """schema.py's tables as the shape a database of ``dialect`` must have."""
    shape = {}
    for table in schema.meta.tables.values():
        columns = {}
        for c in table.columns:
            if dialect == "mysql":
                kind = mysql_type(c.type.compile(dialect=MYSQL))
            else:
                kind = declared_sqlite_type(c)
            columns[c.name] = (kind, c.nullable, default_value(c.server_default.arg if c.server_default else None))
        auto = table.autoincrement_column
        shape[table.name] = {
            "columns": columns,
            "primary key": tuple(c.name for c in table.primary_key.columns),
            "auto-numbered": auto.name if auto is not None else None,
            "unique": {
                tuple(c.name for c in u.columns): u.name for u in table.constraints if isinstance(u, UniqueConstraint)
            }
            | {tuple(c.name for c in i.columns): i.name for i in table.indexes if i.unique},
            "indexes": {i.name: tuple(c.name for c in i.columns) for i in table.indexes if not i.unique},
            "foreign keys": {
                fk.name: (tuple(fk.column_keys), fk.referred_table.name, tuple(e.column.name for e in fk.elements))
                for fk in table.foreign_key_constraints
            },
        }
    return shape


def sqlite_keys(conn, table: str) -> tuple[dict, dict]:
    """(unique keys, other indexes) from SQLite's own catalogue: the inspector does not see
    an inline ``UNIQUE`` (an automatic index)."""
    unique, indexes = {}, {}
    for _, name, is_unique, origin, _partial in conn.exec_driver_sql(f"PRAGMA index_list({table})"):
        if origin == "pk":
            continue
        columns = tuple(row[2] for row in conn.exec_driver_sql(f"PRAGMA index_info({name})"))
        if is_unique:
            unique[columns] = None if name.startswith("sqlite_autoindex_") else name
        else:
            indexes[name] = columns
    return unique, indexes


def migrated_shape(engine) -> dict:
    """The shape of the database behind ``engine``, as ``declared_shape`` gives schema.py's."""
    inspector, dialect, shape = inspect(engine), engine.dialect.name, {}
    for table in sorted(set(inspector.get_table_names()) - RUNNER_TABLES):
        columns, spelled = {}, {}
        for c in inspector.get_columns(table):
            spelled[c["name"]] = c["type"].compile(dialect=engine.dialect)
            kind = mysql_type(spelled[c["name"]]) if dialect == "mysql" else sqlite_type(spelled[c["name"]])
            columns[c["name"]] = (kind, c["nullable"], default_value(c.get("default")))
        primary_key = tuple(inspector.get_pk_constraint(table)["constrained_columns"])
        if dialect == "mysql":
            auto = next((c["name"] for c in inspector.get_columns(table) if c.get("autoincrement") is True), None)
            unique = {tuple(u["column_names"]): u["name"] for u in inspector.get_unique_constraints(table)}
            unique |= {tuple(i["column_names"]): i["name"] for i in inspector.get_indexes(table) if i["unique"]}
            indexes = {i["name"]: tuple(i["column_names"]) for i in inspector.get_indexes(table) if not i["unique"]}
        else:
            rowid = len(primary_key) == 1 and spelled[primary_key[0]] == "INTEGER"  # INTEGER PRIMARY KEY only
            auto = primary_key[0] if rowid else None
            if rowid:  # the rowid is never NULL, whatever the DDL says
                kind, _, default = columns[auto]
                columns[auto] = (kind, False, default)
            with engine.connect() as conn:
                unique, indexes = sqlite_keys(conn, table)
        shape[table] = {
            "columns": columns,
            "primary key": primary_key,
            "auto-numbered": auto,
            "unique": unique,
            "indexes": indexes,
            "foreign keys": {
                fk["name"]: (tuple(fk["constrained_columns"]), fk["referred_table"], tuple(fk["referred_columns"]))
                for fk in inspector.get_foreign_keys(table)
            },
        }
    return shape


def differences(have: dict, want: dict, have_name: str, want_name: str) -> list[str]:
    """Each way ``have`` departs from ``want``, one line each."""
    found = [f"table {t}: in {have_name}, not in {want_name}" for t in sorted(set(have) - set(want))]
    found += [f"table {t}: in {want_name}, not in {have_name}" for t in sorted(set(want) - set(have))]
    for table in sorted(set(have) & set(want)):
        h, w = have[table], want[table]
        for column in sorted(set(h["columns"]) | set(w["columns"])):
            hc, wc = h["columns"].get(column), w["columns"].get(column)
            if hc != wc:
                found.append(f"{table}.{column}: {have_name} has {describe(hc)}, {want_name} {describe(wc)}")
        for key in ("primary key", "auto-numbered", "indexes", "foreign keys"):
            if h[key] != w[key]:
                found.append(f"{table} {key}: {have_name} has {h[key]}, {want_name} {w[key]}")
        if set(h["unique"]) != set(w["unique"]) or any(
            h["unique"][cols] not in (None, w["unique"][cols]) for cols in h["unique"] if cols in w["unique"]
        ):
            found.append(f"{table} unique keys: {have_name} has {h['unique']}, {want_name} {w['unique']}")
    return found


def describe(column) -> str:
    if column is None:
        return "no such column"
    kind, nullable, default = column
    return f"{kind} {'NULL' if nullable else 'NOT NULL'}" + (f" DEFAULT {default}" if default is not None else "")


# --- the tests ---------------------------------------------------------------------------------------


def upgraded(url: str):
    engine = db.make_engine(url)
    db.upgrade(engine)
    return engine


def test_every_dialect_migrated_from_empty_is_schema_py(db_url):
    engine = upgraded(db_url)
    try:
        dialect = engine.dialect.name
        problems = differences(
            migrated_shape(engine), declared_shape(dialect), f"the migrated {dialect} database", "gate/store/schema.py"
        )
    finally:
        engine.dispose()
    assert not problems, "\n".join(problems)


FIRST_RELEASE_ROWS = [
    "INSERT INTO prompt (name, version, config, config_hash, updated_at) "
    "VALUES ('p1', 1, '{}', '{hash}', '2026-01-01')",
    "INSERT INTO prompt_version (prompt_name, version, config, config_hash, update_id, applied_at) "
    "VALUES ('p1', 1, '{}', '{hash}', 1, '2026-01-01')",
    "INSERT INTO dataset (id, name, source_uri, options, created_at) VALUES (7, 'd', 'd.csv', '{}', '2026-01-01')",
    "INSERT INTO prompt_dataset (prompt_name, dataset_id, min_accuracy, created_at) "
    "VALUES ('p1', 7, 0.5, '2026-01-01')",
    "INSERT INTO prompt_update (id, prompt_name, mode, status, candidate_config, candidate_hash, base_version, source, "
    "source_key, created_at) VALUES (1, 'p1', 'apply', 'APPLIED', '{}', '{hash}', 0, '{}', 'cli', '2026-01-01')",
    "INSERT INTO prompt_run (id, update_id, dataset_id, dataset_name, source_uri, source_options, status, "
    "min_accuracy, lease_until, created_at) VALUES (5, 1, 7, 'd', 'd.csv', '{}', 'DONE', 0.5, '2000-01-01', "
    "'2026-01-01')",
    "INSERT INTO prompt_run_item (run_id, item_id, input, expected_decision, actual_decision, verdict) "
    "VALUES (5, 'a', '{}', 'yes', 'yes', 'MATCH')",
    "INSERT INTO worker (id, role, host, pid, started_at, heartbeat_at) VALUES ('w1', 'execute', 'h', 1, "
    "'2026-01-01', '2026-01-01')",
]


def test_a_database_of_the_first_release_upgrades_to_what_a_new_one_is(db_url, tmp_path, request):
    """Only 0001 applied (the first release), a row in each of its tables, then `db upgrade`:
    the same shape as a database made new at head, and as schema.py; and the rows kept."""
    engine = create_engine(db_url)
    dialect = engine.dialect.name
    version, name, sql = db.migrations(dialect)[0]
    with engine.begin() as conn:
        conn.execute(
            text(
                f"CREATE TABLE {db.MIGRATION_TABLE} (version INT NOT NULL PRIMARY KEY, "
                "name VARCHAR(255) NOT NULL, applied_at VARCHAR(32) NOT NULL)"
            )
        )
        for statement in db.split_statements(sql):
            conn.execute(text(statement))
        conn.execute(text(f"INSERT INTO {db.MIGRATION_TABLE} VALUES (:v, :n, 'then')"), {"v": version, "n": name})
    with engine.begin() as conn:
        for statement in FIRST_RELEASE_ROWS:
            conn.execute(text(statement.replace("{hash}", "0" * 64)))
    engine.dispose()
    old = upgraded(db_url)
    if dialect == "sqlite":
        fresh = upgraded(f"sqlite:///{tmp_path / 'fresh.db'}")
    else:
        server_url, _ = request.getfixturevalue("mysql_server")
        fresh = upgraded(create_database(server_url, f"pg_fresh_{uuid.uuid4().hex[:12]}"))
    try:
        problems = differences(
            migrated_shape(old), migrated_shape(fresh), "the upgraded first-release database", "a new database"
        )
        problems += differences(
            migrated_shape(old), declared_shape(dialect), "the upgraded first-release database", "gate/store/schema.py"
        )
        with old.connect() as conn:
            kept = {
                t: conn.execute(text(f"SELECT COUNT(*) FROM {t}")).scalar()
                for t in (
                    "prompt",
                    "prompt_version",
                    "dataset",
                    "prompt_dataset",
                    "prompt_update",
                    "prompt_run",
                    "prompt_run_item",
                    "worker",
                )
            }
            item = conn.execute(text("SELECT run_id, item_id, verdict, position FROM prompt_run_item")).one()
    finally:
        old.dispose()
        fresh.dispose()
    assert not problems, "\n".join(problems)
    assert set(kept.values()) == {1}, kept
    assert tuple(item)[:3] == (5, "a", "MATCH")


# --- the comparison sees what it must --------------------------------------------------------------


@pytest.mark.parametrize("dialect", ["mysql", "sqlite"])
def test_the_comparison_names_a_column_type_index_and_key_that_drifted(dialect):
    want = declared_shape(dialect)
    have = {
        t: {
            **shape,
            "columns": dict(shape["columns"]),
            "indexes": dict(shape["indexes"]),
            "unique": dict(shape["unique"]),
        }
        for t, shape in want.items()
    }
    del have["worker"]["columns"]["oldest_call_seconds"]
    have["answer"]["columns"]["trial_of"] = ("TEXT", True, None)
    have["prompt_run"]["columns"]["role"] = (want["prompt_run"]["columns"]["role"][0], True, "candidate")
    del have["prompt_run_item"]["indexes"]["ix_item_ready"]
    del have["api_token"]["unique"][("token_hash",)]
    del have["prompt_setting"]
    problems = differences(have, want, "db", "schema.py")
    assert problems == [
        "table prompt_setting: in schema.py, not in db",
        "answer.trial_of: db has TEXT NULL, schema.py " + describe(want["answer"]["columns"]["trial_of"]),
        f"api_token unique keys: db has {{('name',): 'uq_api_token_name'}}, schema.py {want['api_token']['unique']}",
        f"prompt_run.role: db has {describe(have['prompt_run']['columns']['role'])}, schema.py "
        f"{describe(want['prompt_run']['columns']['role'])}",
        f"prompt_run_item indexes: db has {{}}, schema.py {want['prompt_run_item']['indexes']}",
        f"worker.oldest_call_seconds: db has no such column, schema.py "
        f"{describe(want['worker']['columns']['oldest_call_seconds'])}",
    ], problems
