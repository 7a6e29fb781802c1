"""The executor's chunk ledger: what one executor holds, under one lock.

An item moves through it as claimed (its chunk ``add``-ed: in flight and held) → begun
(``begin``, or ``reused`` for answers paid for before: its call may go) → answered
(``answered``: out of flight, waiting for its write-back) → written back (``take`` hands
the answered items of a chunk to one write-back, ``written`` says it ended: no longer
held). A chunk is written back a part at a time, as its items are answered, not once its
slowest call is in: an answer waits for the write-back in progress at most. A drain
(``give_back_unstarted``) takes every item not yet begun out of flight as given back, and
from then on no item begins: an item is either answered or given back, never both. A
chunk leaves the ledger when each of its items is written back or given back.

**Calls unrecorded are bounded: the call slots and the write-back window.** A call
begins only while the calls in flight (begun, not answered) are fewer than
``concurrency`` and the calls unrecorded (in flight, plus answered and not yet written
back) are fewer than ``concurrency + window``. A call's slot is free again when its answer
arrives; its place in the window when its answer is written back (``written``), the
answered ones a batch at a time by the write-back threads. So at any moment at most
``concurrency + window`` calls of this process were made and are not in the database, and
a process killed at any moment loses at most that many items' answers (× the calls of an
item), which another worker then makes again: the at-least-once bound
(docs/operations.md). ``window`` 0 is a slot freed only by the write-back (before issue 51).
A write-back the database never took keeps its place in the window until its claims are
settled (``settled_later``): the bound holds for the claims on record, whatever failed.

**The bound on record is announced before it is used.** Each claim, write-back and
settlement records, with this executor's claims, the most calls it may have unrecorded
(``to_announce``); the ledger lets that many begin only once a transaction carrying it has
committed (``announce``). It starts at ``concurrency`` and grows by one per commit while a
call waits on it and not on a call slot, up to ``concurrency + window``: an executor whose
answers seldom wait for their write-back keeps a bound near the calls in flight, and the
figure of calls a dead worker may have made (``store.stops.unrecorded_claims``: its claims
unsettled, no more than its largest bound on record) stays near the truth.

``room`` is how many items the claimer may claim next, and waits when there is none; the
condition it waits on is notified as calls answer and write-backs end. An item whose
last claims were lost (a **suspect**, ``ClaimedItem.claims`` > ``SUSPECT_AFTER``) comes in
a chunk of its own (``store.items.claim_items``); ``suspects`` counts those held, and the
executor holds one at a time (an item that kills its worker then takes no other suspect
with it).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from gate.records import ClaimedItem, ItemResult
from gate.store.items import SUSPECT_AFTER

ROOM_WAIT = 0.05  # the longest wait for room (tests/integration/test_executor_loop.py)
PARALLEL_WRITES = 2  # write-backs of one chunk at once: the next batch commits while one does


@dataclass
class Chunk:
    token: str
    items: list[ClaimedItem]
    results: list[ItemResult] = field(default_factory=list)  # every answer, in the order they came
    renewed_at: float = field(default_factory=time.monotonic)
    started: set[int] = field(default_factory=set)  # items whose call has begun
    given_back: int = 0  # items a drain gave back uncalled
    claimed_at: float = field(default_factory=time.monotonic)
    prepared_at: float | None = None  # its items handed to the call threads
    unwritten: list[ItemResult] = field(default_factory=list)  # answered, not yet taken by a write-back
    writing: int = 0  # its write-backs scheduled or running (at most PARALLEL_WRITES)
    parts: int = 0  # its write-backs so far (each adds to its own tally stripe)
    written: int = 0  # answers whose write-back ended (written or not)

    @property
    def done(self) -> bool:
        """Every item answered or given back."""
        return len(self.results) + self.given_back == len(self.items)

    @property
    def settled(self) -> bool:
        """Every item written back or given back: the chunk leaves the ledger."""
        return self.written + self.given_back == len(self.items)

    @property
    def suspect(self) -> bool:
        return any(i.claims > SUSPECT_AFTER for i in self.items)

    @property
    def run_id(self) -> int:
        return self.items[0].run_id


class ChunkLedger:
    def __init__(self, concurrency: int, chunk_size: int, window: int = 0):
        self.concurrency = concurrency
        self.window = window  # answered calls that may wait for their write-back beyond the call slots
        self.announced = concurrency  # calls unrecorded allowed now: a bound on record (to ``bound``)
        self.wanted = False  # a call waited on ``announced`` alone: the next transaction announces one more
        self.chunk_size = chunk_size
        self.lock = threading.Lock()
        self.capacity = threading.Condition(self.lock)  # the claimer waits here for room
        self.slots = threading.Condition(self.lock)  # call threads wait here for a call slot
        self.in_flight = 0  # items claimed and not yet answered (nor given back)
        self.held = 0  # items claimed and not yet written back (nor given back)
        self.calling = 0  # calls begun and not answered yet: at most ``concurrency``
        self.unrecorded = 0  # calls begun whose answers are not written back yet: at most ``bound``
        self.owed = 0  # of those, answers whose write-back failed and whose claims are not settled yet
        self.suspects = 0  # chunks held of an item whose last claims were lost
        self.prep_bound = False  # the last chunk's calls took less time than claiming and preparing it
        self.chunks: dict[str, Chunk] = {}  # claimed and not yet settled
        self.draining = False  # set once by give_back_unstarted(): no item begins after it
        self.calls_began: dict[tuple[int, int], float] = {}  # (run, position) -> when its call began

    @property
    def bound(self) -> int:
        """The most calls (items' calls) of this process made and not on record at any moment."""
        return self.concurrency + self.window

    # --- room for the next claim ---------------------------------------------------------

    @property
    def max_queued(self) -> int:
        """Items claimed and not yet answered: the calls in flight plus one chunk queued
        behind them, so a call slot that frees up starts the next item at once and claims
        stay off the critical path. When a chunk's calls take less time than claiming and
        preparing it (a provider answering in milliseconds, answers reused), the calls wait
        on the claims: then one more chunk is claimed and prepared while the calls of the
        one before run (``prep_bound``). Answered items wait for their write-back; they
        do not hold up claims (up to ``max_held``)."""
        return self.concurrency + (2 if self.prep_bound else 1) * self.chunk_size

    @property
    def max_held(self) -> int:
        return 4 * self.max_queued

    def room(self, wait: float = ROOM_WAIT) -> int:
        """Room for a whole chunk (claims of a few items would cost a commit each), or
        for what is left when nothing is claimed at all. Short of that, it waits up to
        ``wait`` for calls to answer or write-backs to finish (both notify ``capacity``)
        until there is room, and says 0 if there is none by then (a chunk is written back
        a part at a time, and each part wakes it: it looks again). With an instant model,
        or every answer reused, nothing is in flight while the answered items wait for
        their write-back, and returning at once would spin the claimer and starve the
        write-back threads of the GIL (tests/integration/test_executor_loop.py)."""
        deadline = time.monotonic() + wait
        with self.capacity:
            while True:
                room = min(self.max_queued - self.in_flight, self.max_held - self.held)
                if room >= min(self.chunk_size, self.max_queued) or self.held <= 0:
                    return max(0, room)
                left = deadline - time.monotonic()
                if left <= 0:
                    return 0
                self.capacity.wait(timeout=left)  # woken by an answer or a write-back: look again

    # --- an item's way through ----------------------------------------------------------

    def add(self, chunk: Chunk) -> None:
        """A chunk was claimed: its items are in flight and held."""
        with self.lock:
            self.chunks[chunk.token] = chunk
            self.in_flight += len(chunk.items)
            self.held += len(chunk.items)
            self.suspects += chunk.suspect

    def _may_begin(self) -> bool:
        return self.calling < self.concurrency and self.unrecorded < min(self.announced, self.bound)

    def _wait_for_slot(self) -> None:
        """(Under the lock.) Wait for a call slot and a place; a wait on the bound on record
        alone asks the next commit for one more (``to_announce``)."""
        if self.calling < self.concurrency and self.unrecorded < self.bound:
            self.wanted = True
        self.slots.wait()

    def wants_more(self) -> bool:
        return self.wanted and self.announced < self.bound

    def to_announce(self) -> int:
        """The bound the next claim or write-back records for this executor: one more than
        the one on record while a call waits for it, up to ``bound``."""
        with self.lock:
            return min(self.bound, self.announced + 1) if self.wanted else min(self.announced, self.bound)

    def announce(self, bound: int) -> None:
        """A transaction recording ``bound`` committed: that many calls may be unrecorded."""
        with self.lock:
            if bound > self.announced:
                self.slots.notify(bound - self.announced)
                self.announced, self.wanted = bound, False

    def begin(self, chunk: Chunk, item: ClaimedItem) -> bool:
        """The item's call (or its reuse) begins once a call slot is free (every call begun
        and not yet answered holds one) and the window has room (every call begun and not
        yet written back holds a place), unless a drain has begun (which gave the item
        back): False then."""
        with self.lock:
            while not self._may_begin() and not self.draining:
                self._wait_for_slot()
            if self.draining:
                return False
            self.calling += 1
            self.unrecorded += 1
            if self._may_begin():
                self.slots.notify()  # room for one more: a waiter woken by the other limit may go
            chunk.started.add(item.position)
            self.calls_began[(item.run_id, item.position)] = time.monotonic()
            return True

    def trial_began(self, item: ClaimedItem) -> None:
        """The item's next trial is called: its call's age starts again."""
        with self.lock:
            self.calls_began[(item.run_id, item.position)] = time.monotonic()

    def answered(self, chunk: Chunk, result: ItemResult) -> bool:
        """An item's result is in (its call began, so no drain gave it back); True when the
        caller is to schedule a write-back of the chunk (none is scheduled). Its call slot
        is free now; its place in the window too when it made no call, else once written back."""
        with self.capacity:
            self.calls_began.pop((chunk.items[0].run_id, result.position), None)
            if result.position not in chunk.started:
                return False
            self.calling -= 1
            if not result.calls:
                self.unrecorded -= 1
            self.slots.notify()  # its slot: a call waiting for one may begin
            return self._add_results(chunk, [result])

    def reused(self, chunk: Chunk, results: list[ItemResult]) -> bool:
        """Items whose every answer was paid for before: begun and answered together, under
        one hold of the lock (one by one, as ``begin`` and ``answered`` take a call's, the
        lock and its waiters were most of an all-reused chunk's cost). A drain that began
        first gave them back instead. True when the caller is to schedule a write-back."""
        if not results:
            return False
        with self.capacity:
            if self.draining:
                return False
            chunk.started.update(r.position for r in results)
            return self._add_results(chunk, results)

    def _add_results(self, chunk: Chunk, results: list[ItemResult]) -> bool:
        """(Under the lock.) Results in, their calls out of flight, waiting for a write-back;
        True when none is scheduled (then one is, by the caller)."""
        chunk.results.extend(results)
        chunk.unwritten.extend(results)
        self.in_flight -= len(results)
        if self.max_queued - self.in_flight >= min(self.chunk_size, self.max_queued) or not self.in_flight:
            self.capacity.notify_all()  # room for a whole chunk: the claimer may go
        if chunk.done:
            self._judge_pipeline(chunk)
        return self._schedule(chunk)

    @staticmethod
    def _schedule(chunk: Chunk) -> bool:
        """(Under the lock.) Whether a write-back of the chunk is to be scheduled now: there
        are answers to write and fewer than ``PARALLEL_WRITES`` write-backs of it at work (a
        place in the window is free only once its answer is written, so with a fast provider
        the answers of one commit wait for the next one rather than for the one before it)."""
        if chunk.writing >= PARALLEL_WRITES or not chunk.unwritten:
            return False
        chunk.writing += 1
        return True

    def _judge_pipeline(self, chunk: Chunk) -> None:
        """(Under the lock, as a chunk's last answer is in.) Whether its calls took less time
        than its claim and preparation: then the claimer prepares one chunk ahead."""
        if chunk.prepared_at is not None and not chunk.given_back:
            now = time.monotonic()
            self.prep_bound = now - chunk.prepared_at < chunk.prepared_at - chunk.claimed_at

    def take(self, chunk: Chunk) -> tuple[list[ItemResult], int]:
        """For a write-back of the chunk: its answers not yet taken, and which part of the
        chunk's write-backs they are (empty: nothing more to write, and this write-back
        ends; an answer after this schedules a new one)."""
        with self.lock:
            batch, chunk.unwritten = chunk.unwritten, []
            if not batch:
                chunk.writing -= 1
                return batch, chunk.parts
            chunk.parts += 1
            return batch, chunk.parts

    def written(self, chunk: Chunk, batch: list[ItemResult], settled: bool = True) -> bool:
        """A write-back of ``batch`` ended (written or not): those items are no longer held,
        and their places in the window are free, unless the write-back did not reach the
        database (``settled`` False: their claims are not settled, and their places stay
        taken until ``settled_later`` says they are). True when nothing is held any more."""
        with self.capacity:
            chunk.written += len(batch)
            self.held -= len(batch)
            freed = sum(1 for r in batch if r.calls)
            if settled:
                self.unrecorded -= freed
                self.slots.notify(freed)  # as many calls as places freed (not every waiter: 32 threads woken for 1)
            else:
                self.owed += freed
            self._leave_if_settled(chunk)
            self.capacity.notify_all()
            return self.held == 0

    def settled_later(self, calls: int) -> None:
        """The claims of a failed write-back's ``calls`` answers were settled by a later
        transaction: their places in the window are free."""
        with self.lock:
            self.owed -= calls
            self.unrecorded -= calls
            self.slots.notify(calls)

    def _leave_if_settled(self, chunk: Chunk) -> None:
        if chunk.settled and self.chunks.pop(chunk.token, None) is chunk:
            self.suspects -= chunk.suspect

    def abandon(self, chunk: Chunk) -> None:
        """The chunk could not be prepared (no item of it began): it leaves the ledger
        unwritten, its leases left to run out. Nothing, when a drain settled it first
        (it gave every item back)."""
        with self.capacity:
            if self.chunks.pop(chunk.token, None) is not chunk:
                return
            self.suspects -= chunk.suspect
            self.in_flight -= len(chunk.items)
            self.held -= len(chunk.items)
            self.capacity.notify_all()

    # --- leases, the drain, the heartbeat -----------------------------------------------

    def due_for_renewal(self, age: float) -> list[Chunk]:
        """The chunks held whose leases were renewed (or taken) more than ``age`` s ago."""
        now = time.monotonic()
        with self.lock:
            return [c for c in self.chunks.values() if now - c.renewed_at > age]

    def give_back_unstarted(self) -> tuple[list[tuple[Chunk, list[int]]], list[Chunk]]:
        """The drain (once): from now on no item begins, and every item not begun is given
        back, out of flight and no longer held. Returns each chunk that gave items back with
        their positions (the caller releases them in the database), and the chunks whose
        answers now need a write-back scheduled (the caller schedules it)."""
        with self.capacity:
            if self.draining:
                return [], []
            self.draining = True
            self.slots.notify_all()  # a call waiting for a slot does not begin
            given, to_write = [], []
            for chunk in list(self.chunks.values()):
                positions = [i.position for i in chunk.items if i.position not in chunk.started]
                chunk.given_back = len(positions)
                self.in_flight -= len(positions)
                self.held -= len(positions)
                if positions:
                    given.append((chunk, positions))
                if not chunk.writing and self._schedule(chunk):  # (an answer always has one scheduled)
                    to_write.append(chunk)
                self._leave_if_settled(chunk)
            return given, to_write

    def all_written(self) -> bool:
        """Nothing claimed is held: every item written back, given back (or abandoned)."""
        with self.lock:
            return self.held == 0

    def oldest_call_age(self) -> float | None:
        with self.lock:
            oldest = min(self.calls_began.values(), default=None)
        return None if oldest is None else time.monotonic() - oldest
