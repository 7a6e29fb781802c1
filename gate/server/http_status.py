"""Which HTTP status a GateError answers with, for the JSON API and the status page alike:
404 an unknown name or id, 403 another caller's object (``Forbidden``), 409 a state change
refused (or lost to a race), 503 the database away or behind its migrations, 400 any other
refusal of the caller's input."""

from __future__ import annotations

from ..errors import DatabaseError, Forbidden, GateError, IllegalTransition, MigrationError, NotFound, TooLarge, TooSlow


def status_of(exc: GateError) -> int:
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, IllegalTransition):
        return 409
    if isinstance(exc, Forbidden):
        return 403
    if isinstance(exc, TooLarge):
        return 413
    if isinstance(exc, TooSlow):
        return 408
    if isinstance(exc, (DatabaseError, MigrationError)):
        return 503
    return 400
