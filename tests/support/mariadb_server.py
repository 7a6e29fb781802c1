"""A throwaway MariaDB/MySQL server for the test suite.

Order of preference: PROMPTGATE_TEST_MYSQL_URL; a mariadbd/mysqld found on PATH (or in
/usr/sbin), started in a temp datadir on a free port; testcontainers MySQL 8.4 when Docker
answers. Otherwise the run fails and says so.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

HOW = (
    "set PROMPTGATE_TEST_MYSQL_URL=mysql://user:pass@host:port/db, or install a server "
    "binary (apt-get install mariadb-server; `make test` does it), or run Docker for testcontainers"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_binary(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name) or next(
            (str(p) for p in (Path("/usr/sbin") / name, Path("/usr/bin") / name) if p.exists()), None
        )
        if found:
            return found
    return None


def memory_folder(needed_bytes: int = 4 << 30) -> str | None:
    """/dev/shm when it is there with room (the test server's data: its DDL, each test's
    database made and migrated, is ~3x quicker in memory), else the temp folder."""
    try:
        stat = os.statvfs("/dev/shm")
    except OSError:
        return None
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) and stat.f_bavail * stat.f_frsize >= needed_bytes else None


class LocalMariaDB:
    """mariadbd in a temp datadir on a free loopback port; root over TCP without password."""

    def __init__(self, durable: bool = True, base: str | None = None, buffer_pool: str = "256M"):
        """``durable``: every COMMIT flushed to disk (the benchmarks); without, the log is
        written to the OS at each COMMIT and flushed once a second (the tests: a killed
        server loses nothing, only a machine that stops would). ``base``: where the data
        directory goes (the tests: /dev/shm when it is there)."""
        self.durable = durable
        self.buffer_pool = buffer_pool
        self.server = find_binary("mariadbd", "mysqld")
        self.installer = find_binary("mariadb-install-db", "mysql_install_db")
        if not self.server or not self.installer:
            raise RuntimeError("no MariaDB/MySQL server binary on PATH")
        self.dir = Path(tempfile.mkdtemp(prefix="promptgate-mariadb-", dir=base))
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def datadir(self) -> Path:
        return self.dir / "data"

    @property
    def tmpdir(self) -> Path:
        """The server's own temp folder: servers started at once (one per test process) that
        shared /tmp collided on their temp tables' names ("Error on delete of
        '/tmp/#sql-temptable-…'"), and the machine's my.cnf is not read (--no-defaults)."""
        return self.dir / "tmp"

    def install(self) -> None:
        self.datadir.mkdir()
        self.tmpdir.mkdir()
        user = ["--user=root"] if os.geteuid() == 0 else []
        done = subprocess.run(
            [
                self.installer,
                "--no-defaults",
                f"--datadir={self.datadir}",
                f"--tmpdir={self.tmpdir}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                *user,
            ],
            capture_output=True,
            timeout=120,
        )
        if done.returncode:
            said = (done.stdout + done.stderr).decode(errors="replace").strip().splitlines()
            raise RuntimeError(f"{self.installer} failed ({done.returncode}): " + " | ".join(said[:6]))

    def start(self) -> None:
        user = ["--user=root"] if os.geteuid() == 0 else []
        self.proc = subprocess.Popen(
            [
                self.server,
                "--no-defaults",
                f"--datadir={self.datadir}",
                f"--port={self.port}",
                "--bind-address=127.0.0.1",
                f"--socket={self.dir / 'sock'}",
                f"--tmpdir={self.tmpdir}",
                f"--pid-file={self.dir / 'pid'}",
                "--skip-grant-tables=0",
                f"--innodb-buffer-pool-size={self.buffer_pool}",
                "--max-connections=500",
                f"--innodb-flush-log-at-trx-commit={1 if self.durable else 2}",
                "--sync-binlog=0",
                "--skip-log-bin",
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_bin",
                "--transaction-isolation=READ-COMMITTED",
                *user,
            ],
            stdout=open(self.dir / "server.log", "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._wait_ready()

    def _wait_ready(self, seconds: float = 60) -> None:
        import pymysql

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mariadbd exited: {(self.dir / 'server.log').read_text()[-2000:]}")
            try:
                pymysql.connect(host="127.0.0.1", port=self.port, user="root", connect_timeout=1).close()
                return
            except pymysql.err.OperationalError:
                time.sleep(0.1)
        raise RuntimeError("mariadbd did not answer within 60 s")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, database: str = "") -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/{database}"


@contextmanager
def running(server: LocalMariaDB | None = None):
    """Install and start a LocalMariaDB (or the one given), yield it, clean it up."""
    server = server or LocalMariaDB()
    server.install()
    server.start()
    try:
        yield server
    finally:
        server.cleanup()


def create_database(server_url: str, name: str) -> str:
    """Create an empty database on the server and return its URL."""
    from sqlalchemy.engine import make_url

    from gate.mysql_tls import (
        PreferredTLSConnection,
    )  # PyMySQL's own built a TLS context each time (15 s of the suite's CPU)

    u = make_url(server_url)
    conn = PreferredTLSConnection(host=u.host, port=u.port or 3306, user=u.username, password=u.password or "")
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    finally:
        conn.close()
    return u.set(database=name).render_as_string(hide_password=False)
