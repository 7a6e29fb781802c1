"""A poller's bound on one item's unexpected errors (a run finalize cannot end, an update
reconcile cannot end): each failure is logged with its traceback under an error id; after
``PROMPTGATE_FINALIZE_ATTEMPTS`` in a row in this process (5 by default) the caller ends the
item in a terminal state that is not a success, its reason naming that id. Without it such an
item was retried for ever with backoff, and, first in its batch's order, held back every
item after it. A database fault the poller retries (``gate.db.is_retryable``) is not counted."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterable

from gate.db import is_retryable

GAVE_UP = (
    "{what} could not be {done}: an unexpected error {count} times in a row (error id {id}); "
    "the worker's log has the error under that id"
)


class GiveUp:
    def __init__(self, role: str, attempts: int):
        self.log = logging.getLogger(f"promptgate.{role}")
        self.role, self.attempts = role, attempts
        self.failures: dict[int, int] = {}  # item id → its unexpected errors in a row

    def succeeded(self, key: int) -> None:
        self.failures.pop(key, None)

    def failed(self, key: int, what: str, exc: Exception) -> tuple[int, str] | None:
        """Log ``exc`` under a new error id; (failures, error id) once the bound is reached
        (the count starts again), else None."""
        count = self.failures[key] = self.failures.get(key, 0) + 1
        found = secrets.token_hex(6)
        self.log.error(
            "%s: %s failed (%d of %d), error id %s", self.role, what, count, self.attempts, found, exc_info=exc
        )
        if count < self.attempts:
            return None
        self.failures.pop(key, None)
        return count, found

    def one_by_one(
        self, keys: Iterable[int], end_one: Callable[[int], bool], on_failed: Callable[[int, Exception], None]
    ) -> list[int]:
        """A batch that raised, again item by item: ``end_one(key)`` in its own transaction,
        True when it ended the item; an item that raises is passed to ``on_failed`` and the
        others go on. A database fault the poller retries is raised to its backoff."""
        done = []
        for key in keys:
            try:
                if end_one(key):
                    done.append(key)
                    self.succeeded(key)
            except Exception as exc:
                if is_retryable(exc):
                    raise
                on_failed(key, exc)
        return done
