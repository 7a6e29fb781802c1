"""What a caller is told of a gate error (issue 48, finding 5). A database fault's driver
text names the service's account, host, database and table (``(1142, "INSERT, UPDATE command
denied to user 'gate'@'localhost' for table `pg`.`served_report`")``): admin gets it, every
other caller (read, feedback, submit, anonymous, one not yet known) one generic line with an
error id, and the service's log has the full text under that id for the operator."""

from __future__ import annotations

import logging
import secrets

from gate.errors import DatabaseError, GateError, first_line

log = logging.getLogger("promptgate.server")

DATABASE_FAULT = "the gate's database failed (error id {id}); its operator finds the cause in the service's log"


def error_id() -> str:
    """A short random id, to find one fault in the log: 12 hex characters."""
    return secrets.token_hex(6)


def shown(exc: GateError, scope: str | None, limit: int = 500) -> str:
    """``exc``'s one line as a caller of ``scope`` sees it (None: anonymous or not known)."""
    if not isinstance(exc, DatabaseError):
        return first_line(exc, limit)
    found = error_id()
    log.warning("database error %s: %s", found, first_line(exc, 2000))
    if scope == "admin":
        return f"{first_line(exc, limit)} (error id {found})"
    return DATABASE_FAULT.format(id=found)
