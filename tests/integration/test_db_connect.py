"""Opening connections to MariaDB costs what the connection needs, not a CA store per
connection (gate.db: the preferred-TLS context is built once per process)."""

from __future__ import annotations

import ssl

import pymysql.connections
from sqlalchemy import text

from gate.db import make_engine, warm_pool


def test_a_pool_of_connections_builds_the_preferred_tls_context_at_most_once(mysql_url, monkeypatch):
    built = []
    create = ssl.create_default_context

    def counted(*args, **kwargs):
        built.append(args or kwargs)
        return create(*args, **kwargs)

    monkeypatch.setattr(pymysql.connections.ssl, "create_default_context", counted)
    engine = make_engine(mysql_url, pool_size=6)
    try:
        warm_pool(engine, 6)
        held = [engine.connect() for _ in range(6)]
        answers = [conn.execute(text("SELECT 1")).scalar() for conn in held]
        for conn in held:
            conn.close()
    finally:
        engine.dispose()
    assert answers == [1] * 6
    assert len(built) <= 1, f"{len(built)} TLS contexts built (each loads the system's CA store) for 6 connections"
