"""The network side of a SQL warehouse source: connect and read timeouts for every
connection, and what the service requires of a ``sql+`` source it reads for a caller.

Through the service (``SourceOptions.egress`` set) a source must be postgresql (psycopg,
psycopg2), mysql or mariadb (pymysql, mysqldb); it must name a host (no local socket) and
a user and password (no peer or ambient authentication); it takes only the driver options
in ``SERVICE_OPTIONS``; its host passes the operator's policy (``egress.Egress.pin``) and
the connection goes to the checked address (libpq: ``hostaddr``, the name kept for TLS;
MySQL: the address itself). Its errors say the kind of failure, never the driver's text
(which may carry what the server sent)."""

from __future__ import annotations

import math

from gate.errors import DatasetError

SERVICE_DRIVERS = {
    "postgresql": ("psycopg", "psycopg2"),
    "mysql": ("pymysql", "mysqldb"),
    "mariadb": ("pymysql", "mysqldb"),
}
SERVICE_OPTIONS = frozenset({"sslmode", "connect_timeout", "charset", "application_name"})
DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306}
MYSQL_AUTH_FAILED = (1044, 1045, 1698, 2059)


def timeouts(url, seconds: float) -> dict:
    """connect_args bounding connecting and each read (each statement on PostgreSQL)."""
    backend, driver = url.get_backend_name(), url.get_driver_name()
    whole = max(1, math.ceil(seconds))
    if backend in ("mysql", "mariadb") and driver in ("pymysql", "mysqldb"):
        return {"connect_timeout": whole, "read_timeout": whole, "write_timeout": whole}
    if backend == "postgresql" and driver in ("psycopg", "psycopg2"):
        args: dict[str, int | str] = {"connect_timeout": max(2, whole)}
        if "options" not in url.query:
            args["options"] = f"-c statement_timeout={whole * 1000}"
        return args
    return {}


def for_service(url, egress, display: str):
    """(URL, connect_args) of a source the service reads for a caller, or a DatasetError."""
    backend, driver = url.get_backend_name(), url.get_driver_name()
    if driver not in SERVICE_DRIVERS.get(backend, ()):
        raise DatasetError(
            f"{display}: the service reads sql+ sources of postgresql (psycopg), mysql or mariadb (pymysql) only"
        )
    if not url.host:
        raise DatasetError(f"{display}: a sql+ source sent to the service must name its host (no local socket)")
    if not url.username or not url.password:
        raise DatasetError(
            f"{display}: a sql+ source sent to the service must name a user and a password (no "
            f"peer or ambient authentication)"
        )
    refused = sorted(set(url.query) - SERVICE_OPTIONS)
    if refused:
        raise DatasetError(
            f"{display}: the service takes no {refused[0][:40]!r} option in a sql+ source (only "
            f"{', '.join(sorted(SERVICE_OPTIONS))})"
        )
    address = egress.pin(url.host, url.port or DEFAULT_PORTS[backend], display)
    if backend == "postgresql":
        return url, {"hostaddr": address}
    return url.set(host=address), {}


def failure_kind(exc) -> str:
    """What kind of failure a driver error is, in our words."""
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).lower()
    if "timed out" in text or "timeout expired" in text:
        return "timed out"
    code = orig.args[0] if getattr(orig, "args", None) and isinstance(orig.args[0], int) else None
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if code in MYSQL_AUTH_FAILED or (sqlstate or "").startswith("28"):
        return "authentication failed"
    if sqlstate == "57014":
        return "the query timed out (statement_timeout)"
    if "connection refused" in text:
        return "cannot connect: connection refused"
    if code in (2003, 2005, 2006, 2013) or (sqlstate is None and type(orig).__name__ == "OperationalError"):
        return "cannot connect: the connection failed or was lost"
    if sqlstate:
        return f"the query failed (SQLSTATE {sqlstate})"
    if code is not None:
        return f"the query failed (MySQL error {code})"
    return f"the query failed ({type(orig).__name__})"
