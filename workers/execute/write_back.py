"""The executor's write-backs, in its write-back threads: a chunk's answered items written
in one guarded transaction (``store.items.write_item_results``, with the answers kept for
reuse and the run's tally), as many as are in each time, until none is left.

**Retried while the lease lasts.** A write-back that meets a deadlock, a lost connection
or a database restarting runs again (``gate.db.transaction``) until its chunk's lease is
about to run out (``LEASE_MARGIN`` before its end, by this process's clock from the last
claim or renewal): the answers are paid for, and until then no other worker may have the
items. Past that, the guard would refuse them anyway (``lease_until > now``), and another
worker calls the items again. What happened is said as it was: results dropped because
their lease ran out (or their update stopped, their items STOPPED) — calls repeated
without any crash, counted in the executor's ``lost`` (logged as each happens and when the
executor closes) — or not written because the database did not answer until the lease was
at risk, or a bug. A write-back that records nothing leaves its items' claims unsettled in
the tally: their calls count among the ones that may have been made
(``store.stops.unrecorded_claims``), and their places in the write-back window stay taken
until a later transaction settles them (``settle_owed``, from the claimer's loop): the
claims on record never hold more calls not on record than the executor's bound.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from gate.db import is_retryable, transaction
from gate.errors import first_line
from gate.records import ItemResult
from gate.store.answers import save_answers
from gate.store.items import write_item_results
from gate.store.stops import add_claims, add_tally, record_bound, stripe_of

from .judging import judged_answers, watch_sentinels, write_judged
from .ledger import Chunk, ChunkLedger
from .results import new_answers, tally_outcomes

log = logging.getLogger("promptgate.execute")
LEASE_MARGIN = 0.05  # of the lease: a write-back starts no new try this close to its end (at most 1 s)
FOREVER = 10**9  # runs of the transaction: the lease's end bounds them, not a count


class BoundOnRecord:
    """This executor's bound as its tally rows record it (``ChunkLedger.announce``): each
    claim, write-back and settlement records the bound in force; one that raises it (a call
    waits on it) records the raised bound in every run this executor claimed, and the ledger
    uses it once that commits. Raises and claims take ``lock`` one at a time, so a run
    claimed meanwhile is never left with a smaller bound than the one in use; a write-back
    raises only when the lock is free (it never waits for a claim)."""

    def __init__(self, ledger: ChunkLedger, tag: str):
        self.ledger, self.tag = ledger, tag
        self.lock = threading.Lock()
        self.runs: set[int] = set()  # runs this executor claimed items of

    @contextmanager
    def recording(self, run_id: int, claim: bool = False) -> Iterator[Record]:
        held = (claim or self.ledger.wants_more()) and self.lock.acquire(blocking=claim)
        try:
            before = self.ledger.announced
            yield Record(self, run_id, self.ledger.to_announce() if held else before, before)
        finally:
            if held:
                self.lock.release()


class Record:
    """What one transaction records of its executor: ``who`` for ``add_tally``,
    ``also(conn)`` in the transaction (a raised bound in the other runs claimed),
    ``committed()`` after it."""

    def __init__(self, on_record: BoundOnRecord, run_id: int, bound: int, before: int):
        self.on_record, self.run_id, self.bound, self.raised = on_record, run_id, bound, bound > before
        self.who: dict[str, Any] = {"claimer": on_record.tag, "bound": bound}

    def also(self, conn) -> None:
        if self.raised:
            for run_id in sorted(self.on_record.runs - {self.run_id}):
                record_bound(conn, run_id, self.on_record.tag, self.bound)

    def committed(self) -> None:
        self.on_record.runs.add(self.run_id)
        if self.raised:
            self.on_record.ledger.announce(self.bound)


class WriteBacks:
    """``chunk(c)`` writes back chunk ``c``'s answers (scheduled by the ledger, which says
    when one is due). ``run_calls``: the executor's RunCalls by run; ``stopper`` judges
    each write-back (workers.execute.early_stop); ``nudge(role)`` wakes a role of the
    process; ``stats`` and ``counting``: the executor's counts and their lock."""

    def __init__(
        self, engine, settings, ledger: ChunkLedger, run_calls: dict, limiter, stopper, stats, counting, nudge, tag=""
    ):
        self.engine, self.settings, self.ledger = engine, settings, ledger
        self.run_calls, self.limiter, self.stopper = run_calls, limiter, stopper
        self.stats, self.counting = stats, counting
        self.nudge: Callable[[str], None] = nudge
        self.bounds = BoundOnRecord(ledger, tag)
        # write-backs that failed: (chunk, items, calls, answers with calls)
        self.owed: list[tuple[Chunk, int, int, int]] = []
        self.owing = threading.Lock()

    def chunk(self, chunk: Chunk) -> None:
        """Write back the chunk's answered items, as many as are in each time, until none is
        left (an answer that comes after schedules the next write-back)."""
        while True:
            batch, part = self.ledger.take(chunk)
            if not batch:
                return
            written: int | None = None
            try:
                written = self._record(chunk, batch, part)
                self._judge(chunk, batch, written)
            finally:
                if written is None:  # its claims are not settled: they keep their places (a bug after
                    self._owe(chunk, batch)  # the commit cannot make them settled twice)
                if self.ledger.written(chunk, batch, written is not None):
                    self.nudge("finalize")

    def _owe(self, chunk: Chunk, batch: list[ItemResult]) -> None:
        with self.owing:
            self.owed.append((chunk, len(batch), sum(r.calls for r in batch), sum(1 for r in batch if r.calls)))

    def settle_owed(self) -> None:
        """The claims of write-backs that never reached the database settled now, their
        calls recorded as made (they were): then their places in the window are free. One
        short transaction each; what fails waits for the next try."""
        with self.owing:
            owed, self.owed = self.owed, []
        for n, (chunk, items, calls, places) in enumerate(owed):
            bound = self.ledger.announced

            def settle(conn, chunk=chunk, items=items, calls=calls, bound=bound) -> None:
                who = {"claimer": self.bounds.tag, "bound": bound}
                add_claims(conn, chunk.run_id, chunk.token, who, settled=items, calls=calls)

            try:
                transaction(self.engine, settle)
            except Exception as exc:
                log.warning("%d write-back(s) still to settle: %s", len(owed) - n, first_line(exc))
                with self.owing:
                    self.owed[:0] = owed[n:]
                return
            self.ledger.settled_later(places)

    def _record(self, chunk: Chunk, batch: list[ItemResult], part: int = 0) -> int | None:
        """One guarded UPDATE, run again on a deadlock or a lost connection while the lease
        lasts. Running it again is safe even when a lost COMMIT did commit: the lease token
        guards it, so the second run writes nothing. The results written; None when it
        never reached the database (the batch's claims are not settled)."""
        try:
            return self._commit(chunk, batch, self.run_calls.get(chunk.run_id), part)
        except Exception as exc:
            self._not_written(chunk, batch, exc)
            return None

    def _judge(self, chunk: Chunk, batch: list[ItemResult], written: int | None) -> None:
        """The counts, the limiter, and the run judged after the write-back (early stop, sentinels)."""
        run_id = chunk.run_id
        run = self.run_calls.get(run_id)
        lost = len(batch) - (written or 0)
        with self.counting:
            self.stats["written"] += written or 0
            self.stats["lost"] += lost
        self.limiter.flush(run_id)
        stopped = self.stopper.after_write_back(run, run_id, batch if written else [], lost)
        watch_sentinels(self.engine, self.stopper, run, run_id, batch if written == len(batch) else [])
        if written is not None and lost:
            why = (
                "their update stopped (their items are STOPPED)"
                if stopped
                else "the lease was lost (another worker calls them again)"
            )
            log.warning("chunk %s: %d result(s) dropped: %s", chunk.token[:8], lost, why)

    def _commit(self, chunk: Chunk, batch: list[ItemResult], run, part: int = 0) -> int:
        run_id = chunk.run_id
        # a --no-reuse run keeps its fresh answers to itself: a kept answer is the first the
        # gate obtained, so re-running until one passes cannot choose what an apply reuses
        answers = new_answers(batch, run.update_id, run_id) if run and run.reuse else []
        answers += judged_answers(batch, run.update_id, run_id) if run and run.reuse else []
        judge = run.context.judge if run else None
        outcomes = tally_outcomes(batch, chunk.items) if judge else None  # counted from the results in hand
        calls = sum(r.calls for r in batch)
        with self.bounds.recording(run_id) as record:
            return self._commit_recorded(chunk, batch, part, answers, judge, outcomes, calls, record)

    def _commit_recorded(self, chunk, batch, part, answers, judge, outcomes, calls, record: Record) -> int:
        run_id = chunk.run_id

        def write(conn) -> int:
            written = write_item_results(conn, run_id, chunk.token, batch)
            whole = written == len(batch)
            if whole:  # kept only from a write-back that held its lease throughout
                save_answers(conn, answers)
                write_judged(conn, run_id, batch)  # its sentinels' verdicts (a judged run)
            # the run's running counts (gate/verdict/early_stop.py), and the calls it made, lease or not
            add_tally(
                conn,
                run_id,
                stripe_of(chunk.token, part),  # two write-backs of a chunk at once: two rows, no lock wait
                None,
                judge.live_run_id if judge else None,
                calls,
                judge.by_label if judge else True,
                settled=len(batch),  # their claims' calls are on record now, written or not
                outcomes=outcomes if whole else None,
                **record.who,
            )
            record.also(conn)
            return written

        while True:
            renewed_at = chunk.renewed_at
            try:
                written = transaction(self.engine, write, attempts=FOREVER, give_up_after=self._lease_left(chunk))
                record.committed()
                return written
            except Exception as exc:
                if not is_retryable(exc) or chunk.renewed_at == renewed_at:
                    raise  # a bug; or the lease is at risk, and was not renewed meanwhile
                # renewed meanwhile (the database answers the renewals): the lease lasts longer

    def _lease_left(self, chunk: Chunk) -> float:
        """Seconds left for a new try: to the lease's end by this process's clock, less the margin."""
        lease = self.settings.lease_seconds
        return max(0.0, chunk.renewed_at + lease - min(1.0, LEASE_MARGIN * lease) - time.monotonic())

    def _not_written(self, chunk: Chunk, batch: list[ItemResult], exc: BaseException) -> None:
        """Nothing of the batch was written: say why, as it was."""
        if is_retryable(exc):
            held = time.monotonic() - chunk.renewed_at
            log.warning(
                "chunk %s: %d result(s) not written: the database did not answer until their lease was "
                "about to run out (%.0f s of %g s; last error: %s); another worker calls them again",
                chunk.token[:8],
                len(batch),
                held,
                self.settings.lease_seconds,
                first_line(exc),
            )
        else:
            log.error("chunk %s: %d result(s) not written: %s", chunk.token[:8], len(batch), first_line(exc))
