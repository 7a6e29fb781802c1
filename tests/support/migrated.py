"""A migrated database per test without migrating it each time: each test process migrates one
template (a MariaDB schema, a SQLite file) once, through the gate's own ``db.upgrade``, and every
test that wants a database at the current version gets a copy of it.

MariaDB: the template's tables as ``SHOW CREATE TABLE`` prints them (indexes, foreign keys,
defaults, AUTO_INCREMENT and table options exactly as the migrations left them) and the rows the
migrations wrote (``schema_migration``, seed rows), in one multi-statement round trip: ~0.07 s
against ~0.3–0.9 s for the 30-odd migrations, whose ALTERs each rebuild a table. SQLite: the
template file copied. A test that checks migrating itself still uses ``mysql_url``/``sqlite_url``
(empty databases) and ``db upgrade``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sqlalchemy.engine import make_url


def _connect(server_url: str, **kwargs):
    from gate.mysql_tls import PreferredTLSConnection

    u = make_url(server_url)
    return PreferredTLSConnection(
        host=u.host, port=u.port or 3306, user=u.username, password=u.password or "", **kwargs
    )


class MySQLTemplate:
    """One migrated schema on the test server, and the statements that copy it."""

    def __init__(self, server_url: str):
        from gate import db
        from support.mariadb_server import create_database

        self.server_url = server_url
        self.name = f"pg_template_{os.getpid()}"
        url = create_database(server_url, self.name)
        engine = db.make_engine(url)
        try:
            db.upgrade(engine)
        finally:
            engine.dispose()
        conn = _connect(server_url)
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT table_name, table_rows FROM information_schema.tables "
                    "WHERE table_schema = %s AND table_type = 'BASE TABLE' ORDER BY table_name",
                    (self.name,),
                )
                tables = [row[0] for row in cur.fetchall()]
                self.creates = []
                self.filled = []
                for table in tables:
                    cur.execute(f"SHOW CREATE TABLE `{self.name}`.`{table}`")
                    self.creates.append(cur.fetchone()[1])
                    cur.execute(f"SELECT 1 FROM `{self.name}`.`{table}` LIMIT 1")
                    if cur.fetchone():
                        self.filled.append(table)
                cur.execute(
                    "SELECT COUNT(*) FROM information_schema.views WHERE table_schema = %s",
                    (self.name,),
                )
                views = cur.fetchone()[0]
                cur.execute(
                    "SELECT COUNT(*) FROM information_schema.triggers WHERE trigger_schema = %s",
                    (self.name,),
                )
                triggers = cur.fetchone()[0]
        finally:
            conn.close()
        if views or triggers:  # the copy below copies tables only: say so rather than copy less
            raise RuntimeError(f"the migrated schema has {views} views and {triggers} triggers: copy them too")

    def fill(self, url: str) -> bool:
        """Copy the template into the database ``url`` names when it has no tables yet (as
        ``mysql_url`` makes it); False, and nothing done, when it has some (the caller migrates)."""
        from pymysql.constants import CLIENT

        name = make_url(url).database
        conn = _connect(self.server_url, client_flag=CLIENT.MULTI_STATEMENTS, autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s", (name,))
                if cur.fetchone()[0]:
                    return False
                statements = [
                    f"USE `{name}`",
                    "SET FOREIGN_KEY_CHECKS = 0",
                    *self.creates,
                    *(f"INSERT INTO `{name}`.`{t}` SELECT * FROM `{self.name}`.`{t}`" for t in self.filled),
                    "SET FOREIGN_KEY_CHECKS = 1",
                ]
                cur.execute(";\n".join(statements))
                while cur.nextset():
                    pass
        finally:
            conn.close()
        return True


class SQLiteTemplate:
    """One migrated SQLite file; each test a copy of it."""

    def __init__(self, folder: Path):
        from gate import db

        self.path = folder / "template.db"
        engine = db.make_engine(f"sqlite:///{self.path}")
        try:
            db.upgrade(engine)
        finally:
            engine.dispose()
        leftovers = [p for p in (Path(f"{self.path}-wal"), Path(f"{self.path}-journal")) if p.exists()]
        if any(p.stat().st_size for p in leftovers):
            raise RuntimeError(f"the SQLite template left a non-empty journal: {leftovers}")

    def fill(self, url: str) -> bool:
        """Copy the template to the file ``url`` names when there is none yet; False when there is."""
        target = Path(make_url(url).database)
        if target.exists() and target.stat().st_size:
            return False
        shutil.copyfile(self.path, target)
        return True


_templates: dict[str, MySQLTemplate | SQLiteTemplate] = {}


def template_for(url: str) -> MySQLTemplate | SQLiteTemplate:
    """This test process's template for the server ``url`` is on (SQLite: one for every file),
    migrated on first use."""
    if url.startswith("sqlite"):
        if "sqlite" not in _templates:
            import atexit
            import tempfile

            folder = tempfile.mkdtemp(prefix="promptgate-sqlite-template-")
            atexit.register(shutil.rmtree, folder, True)
            _templates["sqlite"] = SQLiteTemplate(Path(folder))
        return _templates["sqlite"]
    server = make_url(url).set(database="").render_as_string(hide_password=False)
    if server not in _templates:
        _templates[server] = MySQLTemplate(server)
    return _templates[server]


def _has_tables(url: str) -> bool:
    """Whether the database ``url`` names has tables, asked as ``url``'s own account: a service
    run as an account granted only its tables (test_driver_errors) can reach no template."""
    if url.startswith("sqlite"):
        target = Path(make_url(url).database or "")
        return target.exists() and target.stat().st_size > 0
    conn = _connect(url, database=make_url(url).database)  # PyMySQL's own TLS context: 34 ms of CPU a test
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW TABLES")
            return cur.fetchone() is not None
    finally:
        conn.close()


def migrated(url: str) -> str:
    """The database ``url`` (empty, as ``mysql_url``/``db_url`` make it) at the current schema
    version: the template copied in; migrated by ``db.upgrade`` as before when it has tables
    already (a test that made some, or a copy that is already there). Returns ``url``."""
    if _has_tables(url) or not template_for(url).fill(url):
        from gate import db

        engine = db.make_engine(url)
        try:
            db.upgrade(engine)
        finally:
            engine.dispose()
    return url
