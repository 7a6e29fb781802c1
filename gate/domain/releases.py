"""What the Action's push job did for each commit (``Releases``, a service of ``Gate``): it records
the apply-mode updates it submitted, that nothing needed gating, or that it could not gate
the commit (``not-gated``: an ungated or invalid prompt file, a gate config that could not be
synced), so `wait --sha` answers for every commit the Action saw (``gate.contract.release``).

Only admin may record (the push job's token): a record of ``nothing`` lets a release go
ahead, so a pull request's submit token must not be able to claim it for a commit of the
default branch. A record names only the commit's own apply-mode updates, and ``nothing`` is
refused for a commit that has some (they answer for it)."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from gate import db
from gate.errors import IllegalTransition, UsageError
from gate.records import CommitRecord
from gate.states import Mode
from gate.store.commits import find_commit_record, write_commit_record
from gate.store.updates import updates_for_sha
from gate.untrusted import one_line
from gate.verdict.item_policy import COMMIT_RE

from .boundary import driver_errors_become_gate_errors

OUTCOMES = ("submitted", "nothing", "not-gated")
MAX_DETAIL = 500


@driver_errors_become_gate_errors
class Releases:
    """The push job's commit records, on one gate database (``engine``)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def record_commit(
        self,
        sha: str,
        outcome: str,
        update_ids: list[int] | tuple[int, ...] = (),
        detail: str | None = None,
        repo: str | None = None,
        ref: str | None = None,
        *,
        recorded_by: str | None = None,
    ) -> CommitRecord:
        """Record what the push job did for commit ``sha`` (replacing an earlier record of
        it: a re-run). ``recorded_by``: the service token's name (None: the CLI on the
        database)."""
        if not isinstance(sha, str) or not COMMIT_RE.fullmatch(sha):
            raise UsageError(f"commit SHA {str(sha)[:80]!r} is not a full commit id: use its 40 or 64 hex characters")
        if outcome not in OUTCOMES:
            raise UsageError(f"outcome {str(outcome)[:40]!r} is not one of {', '.join(OUTCOMES)}")
        ids = _ids(update_ids, outcome)
        detail = one_line(detail or "", MAX_DETAIL) or None

        def record(conn) -> None:
            applies = {u.id for u in updates_for_sha(conn, sha) if u.mode == Mode.APPLY}
            if not set(ids) <= applies:
                raise UsageError(
                    f"update(s) {', '.join(map(str, sorted(set(ids) - applies)))} are not apply-mode updates of "
                    f"commit {sha[:12]}: a commit's record names only its own"
                )
            if outcome == "nothing" and applies:
                raise IllegalTransition(
                    f"commit {sha[:12]} has apply-mode updates: they answer for it, not a record of nothing to gate"
                )
            write_commit_record(conn, sha, outcome, ids, detail, _short(repo), _short(ref), _short(recorded_by))

        db.transaction(self.engine, record)
        recorded = self.commit_record(sha)
        assert recorded is not None  # just written, and a commit's record is never deleted
        return recorded

    def commit_record(self, sha: str) -> CommitRecord | None:
        """The push job's record of commit ``sha``, or None."""
        with self.engine.connect() as conn:
            return find_commit_record(conn, sha)


def _ids(update_ids, outcome: str) -> list[int]:
    try:
        ids = sorted({int(i) for i in update_ids or ()})
    except (TypeError, ValueError):
        raise UsageError("update_ids must be update ids (integers)") from None
    if len(ids) > 1000:
        raise UsageError("a commit record names at most 1000 updates")
    if (outcome == "submitted") != bool(ids):
        raise UsageError("a record of submitted names its updates; nothing and not-gated name none")
    return ids


def _short(text: str | None) -> str | None:
    return one_line(text, 191) or None if text else None
