"""A throwaway redis-server for the tests, started like the MariaDB one.

Order of preference: PROMPTGATE_TEST_REDIS_URL; a redis-server found on PATH (or in
/usr/bin, /usr/sbin), started in a temp dir on a free loopback port without persistence.
Otherwise the run fails and says how to get one.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from support.mariadb_server import find_binary, free_port

HOW = (
    "install redis-server (apt-get install redis-server; `make test` does it) or set "
    "PROMPTGATE_TEST_REDIS_URL=redis://host:port/0"
)


class LocalRedis:
    """redis-server in a temp dir on a free loopback port, no persistence."""

    def __init__(self):
        self.server = find_binary("redis-server")
        if not self.server:
            raise RuntimeError(f"no redis-server on PATH, /usr/bin or /usr/sbin: {HOW}")
        self.dir = Path(tempfile.mkdtemp(prefix="promptgate-redis-"))
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    def start(self) -> LocalRedis:
        self.proc = subprocess.Popen(
            [
                self.server,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.dir),
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
                "--daemonize",
                "no",
                "--logfile",
                str(self.dir / "server.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._wait_ready()
        return self

    def _wait_ready(self, seconds: float = 20) -> None:
        import redis

        deadline = time.monotonic() + seconds
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5)
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    log = self.dir / "server.log"
                    raise RuntimeError(f"redis-server exited: {log.read_text()[-2000:] if log.exists() else ''}")
                try:
                    if client.ping():
                        return
                except redis.exceptions.ConnectionError:
                    time.sleep(0.05)
        finally:
            client.close()
        raise RuntimeError("redis-server did not answer within 20 s")

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
