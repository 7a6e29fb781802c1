"""The one error root of prompt-gate.

::

    GateError                     anything the gate refuses or cannot do (exit_code 2 in the CLI)
    ├── UsageError                bad input from a person: a name, a bar, a flag
    │   ├── SpecError             an invalid prompt file: file, field and reason
    │   └── NotFound              an unknown prompt, dataset or update
    ├── IllegalTransition         a state change the state machine refuses (or lost to a race)
    ├── DatasetError              a dataset source that cannot be read or breaks the row contract
    ├── MigrationError            the schema cannot be brought up to date
    └── ModelCallError            a model call that failed (see gate.llm for retryable/permanent)

The CLI maps every GateError to one line on stderr and an exit code; nothing else it
raises is a user's mistake.
"""

from __future__ import annotations


class GateError(Exception):
    exit_code = 2


class UsageError(GateError):
    pass


class SpecError(UsageError):
    def __init__(self, file: str | None, field: str | None, reason: str):
        self.file, self.field, self.reason = file, field, reason
        where = ": ".join(p for p in (file, field) if p)
        super().__init__(f"{where}: {reason}" if where else reason)


class NotFound(UsageError):
    pass


class IllegalTransition(GateError):
    pass


class DatasetError(GateError):
    pass


class MigrationError(GateError):
    pass


class ModelCallError(GateError):
    """A failed model call. ``retryable`` says whether another attempt may succeed;
    ``retry_after`` is the provider's hint in seconds, when it gave one."""

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None,
                 status_code: int | None = None, kind: str = "error"):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status_code = status_code
        self.kind = kind
