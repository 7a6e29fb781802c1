"""The executor's chunk ledger: what one executor holds, under one lock.

An item moves through it as claimed (its chunk ``add``-ed: in flight and held) → begun
(``begin``, or ``reused`` for answers paid for before: its call may go) → answered
(``answered``: out of flight, still held) → written back (``written_back``, once its whole
chunk is answered: no longer held). A drain (``give_back_unstarted``) takes every item not
yet begun out of flight as given back, and from then on no item begins: an item is either
answered or given back, never both. A chunk is whole when each of its items is answered or
given back; exactly one of ``answered``, ``reused`` and ``give_back_unstarted`` says so,
and the chunk leaves the ledger then (its caller writes it back).

``room`` is how many items the claimer may claim next, and waits when there is none; the
condition it waits on is notified as calls answer and chunks are written back. The
executor's hot path takes the lock once per item begun and once per item answered
(``reused``: once per chunk), nothing more.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from gate.records import ClaimedItem, ItemResult

ROOM_WAIT = 0.05  # the longest wait for room (tests/integration/test_executor_loop.py)


@dataclass
class Chunk:
    token: str
    items: list[ClaimedItem]
    results: list[ItemResult] = field(default_factory=list)
    renewed_at: float = field(default_factory=time.monotonic)
    started: set[int] = field(default_factory=set)  # items whose call has begun
    given_back: int = 0  # items a drain gave back uncalled
    claimed_at: float = field(default_factory=time.monotonic)
    prepared_at: float | None = None  # its items handed to the call threads

    @property
    def done(self) -> bool:
        return len(self.results) + self.given_back == len(self.items)

    @property
    def run_id(self) -> int:
        return self.items[0].run_id


class ChunkLedger:
    def __init__(self, concurrency: int, chunk_size: int):
        self.concurrency = concurrency
        self.chunk_size = chunk_size
        self.lock = threading.Lock()
        self.capacity = threading.Condition(self.lock)
        self.in_flight = 0  # items claimed and not yet answered (nor given back)
        self.held = 0  # items claimed and not yet written back
        self.prep_bound = False  # the last chunk's calls took less time than claiming and preparing it
        self.chunks: dict[str, Chunk] = {}  # claimed and not yet whole
        self.draining = False  # set once by give_back_unstarted(): no item begins after it
        self.calls_began: dict[tuple[int, int], float] = {}  # (run, position) -> when its call began

    # --- room for the next claim ---------------------------------------------------------

    @property
    def max_queued(self) -> int:
        """Items claimed and not yet answered: the calls in flight plus one chunk queued
        behind them, so a call slot that frees up starts the next item at once and claims
        stay off the critical path. When a chunk's calls take less time than claiming and
        preparing it (a provider answering in milliseconds, answers reused), the calls wait
        on the claims: then one more chunk is claimed and prepared while the calls of the
        one before run (``prep_bound``). A chunk's answered items wait for its slowest one
        before their one write-back; they do not hold up claims (up to ``max_held``)."""
        return self.concurrency + (2 if self.prep_bound else 1) * self.chunk_size

    @property
    def max_held(self) -> int:
        return 4 * self.max_queued

    def room(self, wait: float = ROOM_WAIT) -> int:
        """Room for a whole chunk (claims of a few items would cost a commit each), or
        for what is left when nothing is claimed at all. Short of that, it waits up to
        ``wait`` for a call to answer or a write-back to finish (both notify ``capacity``)
        and says 0: with an instant model, or every answer reused, nothing is in flight
        while the answered items wait for their write-back, and returning at once would
        spin the claimer and starve the write-back threads of the GIL
        (tests/integration/test_executor_loop.py)."""
        with self.capacity:
            room = min(self.max_queued - self.in_flight, self.max_held - self.held)
            if room < min(self.chunk_size, self.max_queued) and self.held > 0:
                self.capacity.wait(timeout=wait)
                return 0
            return max(0, room)

    # --- an item's way through ----------------------------------------------------------

    def add(self, chunk: Chunk) -> None:
        """A chunk was claimed: its items are in flight and held."""
        with self.lock:
            self.chunks[chunk.token] = chunk
            self.in_flight += len(chunk.items)
            self.held += len(chunk.items)

    def begin(self, chunk: Chunk, item: ClaimedItem) -> bool:
        """The item's call (or its reuse) begins, unless a drain has begun (which gave the
        item back)."""
        with self.lock:
            if self.draining:
                return False
            chunk.started.add(item.position)
            self.calls_began[(item.run_id, item.position)] = time.monotonic()
            return True

    def trial_began(self, item: ClaimedItem) -> None:
        """The item's next trial is called: its call's age starts again."""
        with self.lock:
            self.calls_began[(item.run_id, item.position)] = time.monotonic()

    def answered(self, chunk: Chunk, result: ItemResult) -> bool:
        """An item's result is in (its call began, so no drain gave it back); True when it
        made its chunk whole: the caller writes it back."""
        with self.capacity:
            self.calls_began.pop((chunk.items[0].run_id, result.position), None)
            if result.position not in chunk.started:
                return False
            return self._add_results(chunk, [result])

    def reused(self, chunk: Chunk, results: list[ItemResult]) -> bool:
        """Items whose every answer was paid for before: begun and answered together, under
        one hold of the lock (one by one, as ``begin`` and ``answered`` take a call's, the
        lock and its waiters were most of an all-reused chunk's cost). A drain that began
        first gave them back instead. True when they made their chunk whole."""
        if not results:
            return False
        with self.capacity:
            if self.draining:
                return False
            chunk.started.update(r.position for r in results)
            return self._add_results(chunk, results)

    def _add_results(self, chunk: Chunk, results: list[ItemResult]) -> bool:
        """(Under the lock.) Results in, their calls out of flight; True when the chunk is
        whole (then it leaves ``chunks``: the caller writes it back)."""
        chunk.results.extend(results)
        self.in_flight -= len(results)
        if self.max_queued - self.in_flight >= min(self.chunk_size, self.max_queued) or not self.in_flight:
            self.capacity.notify_all()  # room for a whole chunk: the claimer may go
        if not chunk.done:
            return False
        self.chunks.pop(chunk.token, None)
        self._judge_pipeline(chunk)
        return True

    def _judge_pipeline(self, chunk: Chunk) -> None:
        """(Under the lock, as a chunk's last answer is in.) Whether its calls took less time
        than its claim and preparation: then the claimer prepares one chunk ahead."""
        if chunk.prepared_at is not None and not chunk.given_back:
            now = time.monotonic()
            self.prep_bound = now - chunk.prepared_at < chunk.prepared_at - chunk.claimed_at

    def abandon(self, chunk: Chunk) -> None:
        """The chunk could not be prepared (no item of it began): it leaves the ledger
        unwritten, its leases left to run out. Nothing, when a drain made it whole first
        (its write-back frees what it held)."""
        with self.capacity:
            if self.chunks.pop(chunk.token, None) is not chunk:
                return
            self.in_flight -= len(chunk.items)
            self.held -= len(chunk.items)
            self.capacity.notify_all()

    def written_back(self, chunk: Chunk) -> bool:
        """A whole chunk's write-back ended (written or not): its items are no longer held.
        True when nothing is held any more."""
        with self.capacity:
            self.held -= len(chunk.items)
            self.capacity.notify_all()
            return self.held == 0

    # --- leases, the drain, the heartbeat -----------------------------------------------

    def due_for_renewal(self, age: float) -> list[Chunk]:
        """The chunks held whose leases were renewed (or taken) more than ``age`` s ago."""
        now = time.monotonic()
        with self.lock:
            return [c for c in self.chunks.values() if now - c.renewed_at > age]

    def give_back_unstarted(self) -> tuple[list[tuple[Chunk, list[int]]], list[Chunk]]:
        """The drain (once): from now on no item begins, and every item not begun is given
        back, out of flight. Returns each chunk that gave items back with their positions
        (the caller releases them in the database), and the chunks this made whole (every
        item answered or given back: the caller writes them back)."""
        with self.capacity:
            if self.draining:
                return [], []
            self.draining = True
            given, whole = [], []
            for token, chunk in list(self.chunks.items()):
                positions = [i.position for i in chunk.items if i.position not in chunk.started]
                chunk.given_back = len(positions)
                self.in_flight -= len(positions)
                if positions:
                    given.append((chunk, positions))
                    if chunk.done:
                        whole.append(self.chunks.pop(token))
            return given, whole

    def all_written(self) -> bool:
        """Nothing claimed is held: every chunk is written back (or abandoned)."""
        with self.lock:
            return self.held == 0

    def oldest_call_age(self) -> float | None:
        with self.lock:
            oldest = min(self.calls_began.values(), default=None)
        return None if oldest is None else time.monotonic() - oldest
