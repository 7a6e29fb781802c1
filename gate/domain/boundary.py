"""The service's one boundary for foreign errors: every public method of a class decorated
with ``driver_errors_become_gate_errors`` lets a driver error out only as a DatabaseError
with the driver's first line (never SQL, never a traceback), as httpx maps transport errors
at one boundary."""

from __future__ import annotations

import functools

from sqlalchemy.exc import DBAPIError

from gate.errors import DatabaseError


def driver_errors_become_gate_errors(cls):
    """Every public method of ``cls``: a driver error leaving it is a DatabaseError with the
    driver's first line (never SQL, never a traceback), the one place the service maps
    foreign errors, as httpx maps transport errors at one boundary."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_"):
            continue
        if isinstance(member, classmethod):
            setattr(cls, name, classmethod(_translated(member.__func__)))
        elif callable(member):
            setattr(cls, name, _translated(member))
    return cls


def _translated(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except DBAPIError as exc:
            raise DatabaseError.from_driver(exc) from exc

    return call
