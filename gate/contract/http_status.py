"""Which HTTP status a GateError answers with, and which GateError a status stands for: one
table read both ways, by the service (``gate.service``: the JSON API and the status page)
and by its client (``gate.client.remote``), so the two ends cannot drift apart.

404 an unknown name or id, 403 another caller's object (``Forbidden``), 409 a state change
refused (or lost to a race), 413 a body over its cap, 408 a body that stopped arriving, 503
the database away or behind its migrations, 400 any other refusal of the caller's input.
The client imports this without SQLAlchemy or the server's stack."""

from __future__ import annotations

from gate.errors import (
    DatabaseError,
    Forbidden,
    GateError,
    IllegalTransition,
    MigrationError,
    NotFound,
    TooLarge,
    TooSlow,
    UsageError,
)

# (error class, status), most specific first: an error answers with the status of the first
# row its class matches (NotFound and TooLarge are UsageErrors too); a status stands for the
# class of the first row that has it (503: DatabaseError).
STATUS_OF_ERROR: tuple[tuple[type[GateError], int], ...] = (
    (NotFound, 404),
    (IllegalTransition, 409),
    (Forbidden, 403),
    (TooLarge, 413),
    (TooSlow, 408),
    (DatabaseError, 503),
    (MigrationError, 503),
    (UsageError, 400),
)
OTHER_ERROR_STATUS = 400  # any other GateError is a refusal of the caller's input


def http_status(exc: GateError) -> int:
    """The status the service answers ``exc`` with."""
    return next((status for cls, status in STATUS_OF_ERROR if isinstance(exc, cls)), OTHER_ERROR_STATUS)


def error_class(status: int) -> type[GateError]:
    """The GateError the client raises for a refusal with ``status`` (one in no row, 401 say:
    a plain GateError with the server's message)."""
    return next((cls for cls, row_status in STATUS_OF_ERROR if row_status == status), GateError)
