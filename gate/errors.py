"""The one error root of prompt-gate, and the one boundary where foreign errors join it.

::

    GateError                     anything the gate refuses or cannot do (exit_code 2 in the CLI)
    ├── UsageError                bad input from a person: a name, a bar, a flag
    │   ├── SpecError             an invalid prompt file: file, field and reason
    │   └── NotFound              an unknown prompt, dataset or update
    ├── IllegalTransition         a state change the state machine refuses (or lost to a race)
    ├── Forbidden                 the caller may not touch this (a submit token, another's update)
    ├── DatasetError              a dataset source that cannot be read or breaks the row contract
    ├── MigrationError            the schema cannot be brought up to date
    ├── DatabaseError             the database failed (the driver's first line, never SQL)
    ├── GitHubError               a GitHub API call failed (status and GitHub's message)
    └── ModelCallError            a model call that failed: ``kind`` (a ``CallFailure``) and
                                  ``retryable`` (see gate.calls.llm)

The domain API raises only these: a driver error becomes a ``DatabaseError`` where it
leaves the service (``gate.domain``), as httpx maps transport errors at one boundary. The
CLI maps every GateError to one line on stderr and an exit code; nothing else it raises is
a user's mistake. ``first_line(exc)`` is how any error is quoted in one line.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


def first_line(exc: BaseException | str, limit: int = 200) -> str:
    """An error's message on one line: its first line, at most ``limit`` characters (the
    driver's error of a database error, not the SQL SQLAlchemy appends)."""
    text = str(getattr(exc, "orig", None) or exc) if isinstance(exc, BaseException) else str(exc)
    lines = text.strip().splitlines()
    return (lines[0] if lines else type(exc).__name__ if isinstance(exc, BaseException) else "")[:limit]


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


class TooLarge(UsageError):
    """A request's body over its cap (the service answers 413)."""


class TooSlow(UsageError):
    """A request's body that stopped arriving (the service answers 408)."""


class IllegalTransition(GateError):
    pass


class Forbidden(GateError):
    """The caller is known but may not do this to this object (HTTP 403): a submit token
    cancelling an update another token submitted."""


class DatasetError(GateError):
    pass


class MigrationError(GateError):
    pass


class DatabaseError(GateError):
    """The database failed: unreachable, restarting, out of space... The message is the
    driver's first line."""

    @classmethod
    def from_driver(cls, exc: BaseException) -> DatabaseError:
        return cls(f"database: {first_line(exc, 300)}")


class WaitTimedOut(GateError):
    """A release wait whose timeout passed before anything answered for the commit (no
    update, no record of the push job): exit 3, as any wait that runs out of time."""

    exit_code = 3


class GitHubError(GateError):
    """A GitHub API call failed (status and message from GitHub)."""


class CallFailure(StrEnum):
    """Why a model call failed (``ModelCallError.kind``); compares equal to its value."""

    TIMEOUT = "timeout"  # timeout, HTTP 408                       retryable
    CONNECTION = "connection"  # connection refused / reset              retryable
    RATE_LIMIT = "rate_limit"  # HTTP 429 (retry_after)                  retryable
    SERVER = "server"  # HTTP 5xx (retry_after)                  retryable
    BAD_RESPONSE = "bad_response"  # no choice, malformed JSON               retryable
    AUTH = "auth"  # HTTP 401, 403                           permanent
    BAD_REQUEST = "bad_request"  # other HTTP 4xx                          permanent
    TEMPLATE = "template"  # the template cannot render the item     permanent
    BUDGET = "budget"  # the template overran its budget         permanent
    CONFIG = "config"  # the provider's key variable is unset    permanent
    ERROR = "error"  # anything else                           permanent


class ModelCallError(GateError):
    """A failed model call. ``retryable`` says whether another attempt may succeed;
    ``retry_after`` is the provider's hint in seconds, when it gave one."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        retry_after: float | None = None,
        status_code: int | None = None,
        kind: CallFailure = CallFailure.ERROR,
    ):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status_code = status_code
        self.kind = CallFailure(kind)


def did_you_mean(word: object, choices: Iterable[object]) -> str:
    """ "; did you mean X?" when one of ``choices`` is close to ``word`` (a typo), else ""."""
    import difflib

    close = difflib.get_close_matches(str(word)[:80], [str(c) for c in choices], n=1, cutoff=0.75)
    return f"; did you mean {close[0]}?" if close else ""
