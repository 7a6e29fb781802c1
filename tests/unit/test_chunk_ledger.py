"""The executor's chunk ledger (workers/execute/ledger.py), on its own: what is claimed, in flight,
answered, given back and written back (a part of a chunk at a time), the call slots an
unwritten answer holds, the room for the next claim, and the drain. No database: items are
plain ``ClaimedItem``s, results plain ``ItemResult``s; threads where a race is the point."""

from __future__ import annotations

import random
import threading
import time

from gate.records import ClaimedItem, ItemResult
from gate.states import Verdict
from workers.execute.ledger import Chunk, ChunkLedger

RUN = 7


def chunk(token: str, positions, run_id: int = RUN) -> Chunk:
    return Chunk(token, [ClaimedItem(run_id, p, f"i{p}", {}, "yes", 1) for p in positions])


def result(position: int, calls: int = 1) -> ItemResult:
    return ItemResult(position, Verdict.MATCH, calls=calls)


def answer_all(ledger: ChunkLedger, c: Chunk) -> list[bool]:
    """Begin and answer each item in turn: what each ``answered`` said."""
    said = []
    for item in c.items:
        assert ledger.begin(c, item)
        said.append(ledger.answered(c, result(item.position)))
    return said


def write_all(ledger: ChunkLedger, c: Chunk) -> list[list[int]]:
    """A write-back as the executor runs it: batches taken and written until none is left."""
    batches = []
    while batch := ledger.take(c)[0]:
        batches.append([r.position for r in batch])
        ledger.written(c, batch)
    return batches


def begins_only_after_a_write_back(ledger: ChunkLedger, c: Chunk, item, early: str, late: str) -> None:
    """A call of ``item`` waits (``early`` if it began) until the chunk's answered results are
    written back, then begins (``late`` if it did not)."""
    began = threading.Event()
    thread = threading.Thread(target=lambda: ledger.begin(c, item) and began.set(), daemon=True)
    thread.start()
    assert not began.wait(0.2), early
    batch, _ = ledger.take(c)
    ledger.written(c, batch)
    assert began.wait(5), late
    thread.join()


def test_an_item_is_in_flight_until_answered_and_held_until_it_is_written_back():
    ledger = ChunkLedger(concurrency=4, chunk_size=3)
    c = chunk("a", [0, 1, 2])
    ledger.add(c)
    assert (ledger.in_flight, ledger.held) == (3, 3)
    assert answer_all(ledger, c) == [True, True, False]  # a write-back scheduled, and a second beside it
    assert (ledger.in_flight, ledger.held, ledger.unrecorded) == (0, 3, 3)
    assert not ledger.all_written()
    assert write_all(ledger, c) == [[0, 1, 2]]
    assert ledger.all_written() and (ledger.held, ledger.unrecorded, ledger.chunks) == (0, 0, {})


def test_the_answered_part_of_a_chunk_is_written_back_before_its_slowest_call():
    """Issue 38: a chunk's answers waited for its slowest call, and a process killed
    meanwhile lost them all (~160 answered items). Now each answer goes to a write-back at
    once (at most two of a chunk at work: the answers that come during one commit go in the
    next), and the chunk leaves the ledger when its last item is written."""
    ledger = ChunkLedger(concurrency=4, chunk_size=4)
    c = chunk("a", [0, 1, 2, 3])
    ledger.add(c)
    for item in c.items:
        assert ledger.begin(c, item)
    assert ledger.answered(c, result(0)) is True  # schedule a write-back now
    assert ledger.take(c) == ([result(0)], 1)  # it takes what is in: part 1
    assert ledger.answered(c, result(1)) is True  # one is at work: a second beside it
    assert ledger.answered(c, result(2)) is False  # two at work: this one waits for either
    assert ledger.take(c) == ([result(1), result(2)], 2)
    assert ledger.written(c, [result(0)]) is False
    ledger.written(c, [result(1), result(2)])
    assert ledger.take(c) == ([], 2) and ledger.take(c) == ([], 2)  # both end
    assert ledger.answered(c, result(3)) is True  # the slowest answer schedules another
    assert "a" in ledger.chunks and ledger.held == 1
    assert write_all(ledger, c) == [[3]]
    assert ledger.chunks == {} and ledger.all_written()


def test_a_call_slot_is_free_only_once_its_answer_is_written_back():
    """At most ``concurrency`` calls made and not recorded: a process killed at any moment
    loses at most that many answers (the at-least-once bound of docs/operations.md)."""
    ledger = ChunkLedger(concurrency=2, chunk_size=4)
    c = chunk("a", [0, 1, 2, 3])
    ledger.add(c)
    assert ledger.begin(c, c.items[0]) and ledger.begin(c, c.items[1])
    ledger.answered(c, result(0))
    ledger.answered(c, result(1))
    begins_only_after_a_write_back(
        ledger, c, c.items[2], "a third call began with two answers unwritten", "the write-back did not free the slots"
    )
    assert ledger.unrecorded == 1


def test_a_result_made_without_a_call_frees_its_slot_at_once():
    ledger = ChunkLedger(concurrency=1, chunk_size=2)
    c = chunk("a", [0, 1])
    ledger.add(c)
    assert ledger.begin(c, c.items[0])
    ledger.answered(c, result(0, calls=0))  # e.g. its update stopped before the call
    assert ledger.unrecorded == 0
    assert ledger.begin(c, c.items[1])  # no wait


def test_written_back_says_whether_anything_is_still_held():
    ledger = ChunkLedger(concurrency=4, chunk_size=2)
    first, second = chunk("a", [0, 1]), chunk("b", [2, 3])
    ledger.add(first)
    ledger.add(second)
    answer_all(ledger, first)
    batch, _ = ledger.take(first)
    assert ledger.written(first, batch) is False  # the second is still held
    answer_all(ledger, second)
    batch, _ = ledger.take(second)
    assert ledger.written(second, batch) is True


def test_reused_items_are_begun_and_answered_together():
    ledger = ChunkLedger(concurrency=4, chunk_size=4)
    c = chunk("a", [0, 1, 2, 3])
    ledger.add(c)
    assert ledger.reused(c, []) is False  # nothing reused: nothing happens
    assert ledger.reused(c, [result(0, 0), result(1, 0), result(2, 0)]) is True
    assert c.started == {0, 1, 2} and ledger.in_flight == 1
    assert ledger.calls_began == {} and ledger.unrecorded == 0  # no call: no call's age, no slot
    assert ledger.begin(c, c.items[3])
    assert ledger.answered(c, result(3)) is True  # one write-back is scheduled: a second beside it
    assert write_all(ledger, c) == [[0, 1, 2, 3]]
    assert ledger.in_flight == 0 and "a" not in ledger.chunks


def test_suspects_are_counted_while_held():
    ledger = ChunkLedger(concurrency=4, chunk_size=4)
    plain = chunk("a", [0, 1])
    suspect = Chunk("b", [ClaimedItem(RUN, 5, "i5", {}, "yes", 1, claims=3)])  # two lost before this one
    ledger.add(plain)
    ledger.add(suspect)
    assert ledger.suspects == 1
    answer_all(ledger, suspect)
    write_all(ledger, suspect)
    assert ledger.suspects == 0


def test_the_oldest_calls_age_is_the_oldest_begun_and_not_answered():
    ledger = ChunkLedger(concurrency=4, chunk_size=2)
    c = chunk("a", [0, 1])
    ledger.add(c)
    assert ledger.oldest_call_age() is None
    ledger.begin(c, c.items[0])
    time.sleep(0.05)
    ledger.begin(c, c.items[1])
    assert ledger.oldest_call_age() >= 0.05
    ledger.answered(c, result(0))
    assert ledger.oldest_call_age() < 0.05  # item 1's call is younger
    ledger.trial_began(c.items[1])  # its next trial's call: a new age
    ledger.answered(c, result(1))
    assert ledger.oldest_call_age() is None


# --- room for the next claim -------------------------------------------------------------


def test_room_is_the_calls_in_flight_plus_one_chunk_queued():
    ledger = ChunkLedger(concurrency=8, chunk_size=4)
    assert ledger.max_queued == 12 and ledger.max_held == 48
    assert ledger.room() == 12
    ledger.add(chunk("a", range(4)))
    assert ledger.room() == 8


def test_a_chunk_answered_faster_than_it_was_prepared_queues_one_more_chunk():
    ledger = ChunkLedger(concurrency=8, chunk_size=4)
    slow_prep, fast_prep = chunk("a", range(4)), chunk("b", range(4, 8))
    now = time.monotonic()
    slow_prep.claimed_at, slow_prep.prepared_at = now - 1.0, now - 0.01  # calls took far less than the prep
    ledger.add(slow_prep)
    answer_all(ledger, slow_prep)
    write_all(ledger, slow_prep)
    assert ledger.prep_bound and ledger.max_queued == 8 + 2 * 4
    fast_prep.claimed_at, fast_prep.prepared_at = now - 0.01, now - 0.005  # calls took longer (answered now)
    time.sleep(0.02)
    ledger.add(fast_prep)
    answer_all(ledger, fast_prep)
    assert not ledger.prep_bound and ledger.max_queued == 12


def test_with_no_room_it_waits_while_answered_items_wait_for_their_write_back():
    """Every item answered (nothing in flight) but held up to ``max_held``: room waits
    rather than saying 0 at once (a claimer that asks again at once spins a core and
    starves the write-back threads of the GIL)."""
    ledger = ChunkLedger(concurrency=1, chunk_size=2)  # max_queued 3, max_held 12
    chunks = [chunk(str(n), [2 * n, 2 * n + 1]) for n in range(6)]
    for c in chunks:
        ledger.add(c)
        ledger.reused(c, [result(i.position, 0) for i in c.items])  # answered, waiting for their write-back
    assert (ledger.in_flight, ledger.held) == (0, 12)
    started = time.monotonic()
    assert ledger.room(wait=0.2) == 0
    assert time.monotonic() - started >= 0.15
    ledger.written(chunks[0], ledger.take(chunks[0])[0])
    assert ledger.room() == 2  # a chunk's room: claim


def test_a_write_back_wakes_the_claimer_waiting_for_room():
    ledger = ChunkLedger(concurrency=1, chunk_size=2)  # max_queued 3, max_held 12
    chunks = [chunk(str(n), [2 * n, 2 * n + 1]) for n in range(6)]
    for c in chunks:
        ledger.add(c)
        ledger.reused(c, [result(i.position, 0) for i in c.items])  # answered, waiting for their write-back
    timer = threading.Timer(0.2, lambda: ledger.written(chunks[0], ledger.take(chunks[0])[0]))
    timer.start()
    started = time.monotonic()
    try:
        ledger.room(wait=30)  # 0 after its wait (or, should the timer come first, the room)
        assert time.monotonic() - started < 10, "the write-back did not wake the wait"
    finally:
        timer.cancel()
    assert ledger.room() == 2


def test_an_answer_wakes_the_claimer_when_it_makes_room_for_a_chunk():
    ledger = ChunkLedger(concurrency=2, chunk_size=4)  # max_queued 6
    first, second = chunk("a", range(4)), chunk("b", range(4, 8))
    ledger.add(first)
    ledger.add(second)  # 8 in flight: no room

    def answer_six():  # 2 left in flight: room for a chunk
        ledger.reused(first, [result(p, 0) for p in range(4)])
        ledger.reused(second, [result(4, 0), result(5, 0)])

    timer = threading.Timer(0.2, answer_six)
    timer.start()
    started = time.monotonic()
    try:
        ledger.room(wait=30)
        assert time.monotonic() - started < 10, "the answers did not wake the wait"
    finally:
        timer.cancel()
    assert ledger.in_flight == 2 and ledger.room() == 4


# --- the drain ----------------------------------------------------------------------------


def test_the_drain_gives_back_the_items_not_begun_and_no_others():
    ledger = ChunkLedger(concurrency=8, chunk_size=4)
    calling = chunk("calling", [0, 1, 2, 3])  # two begun, two not
    waiting = chunk("waiting", [4, 5, 6])  # none begun
    answered = chunk("answered", [7, 8])  # one answered, one not begun
    begun = chunk("begun", [9])  # all begun: nothing to give back
    for c in (calling, waiting, answered, begun):
        ledger.add(c)
    ledger.begin(calling, calling.items[0])
    ledger.begin(calling, calling.items[1])
    ledger.begin(answered, answered.items[0])
    assert ledger.answered(answered, result(7)) is True  # its write-back is scheduled
    ledger.begin(begun, begun.items[0])
    assert ledger.in_flight == 10 - 1

    given, to_write = ledger.give_back_unstarted()

    assert {c.token: positions for c, positions in given} == {"calling": [2, 3], "waiting": [4, 5, 6], "answered": [8]}
    assert to_write == []  # every answer has its write-back scheduled already
    assert set(ledger.chunks) == {"calling", "answered", "begun"}  # "waiting" gave every item back
    assert ledger.in_flight == 3  # the three calls begun and not answered
    assert ledger.held == 10 - 6  # the given back are no longer held
    assert write_all(ledger, answered) == [[7]]
    # the calls in flight finish and are written back
    assert ledger.answered(calling, result(0)) is True
    assert ledger.answered(calling, result(1)) is True
    assert ledger.answered(begun, result(9)) is True
    assert ledger.in_flight == 0
    write_all(ledger, calling)
    write_all(ledger, begun)
    assert ledger.chunks == {} and ledger.all_written() and ledger.unrecorded == 0


def test_the_drain_wakes_a_call_waiting_for_a_slot_and_it_does_not_begin():
    ledger = ChunkLedger(concurrency=1, chunk_size=2)
    c = chunk("a", [0, 1])
    ledger.add(c)
    assert ledger.begin(c, c.items[0])
    ledger.answered(c, result(0))  # unwritten: the one slot is held
    outcome = []
    thread = threading.Thread(target=lambda: outcome.append(ledger.begin(c, c.items[1])))
    thread.start()
    time.sleep(0.1)
    given, _ = ledger.give_back_unstarted()
    thread.join(5)
    assert outcome == [False] and [positions for _, positions in given] == [[1]]


def test_no_item_begins_and_no_result_is_taken_after_the_drain_gave_it_back():
    ledger = ChunkLedger(concurrency=8, chunk_size=4)
    c = chunk("a", [0, 1, 2, 3])
    ledger.add(c)
    ledger.begin(c, c.items[0])
    given, to_write = ledger.give_back_unstarted()
    assert [positions for _, positions in given] == [[1, 2, 3]] and to_write == []
    assert ledger.begin(c, c.items[1]) is False  # its call does not begin
    assert ledger.reused(c, [result(2), result(3)]) is False  # nor its reuse
    assert ledger.answered(c, result(1)) is False  # a result for it is not taken
    assert c.results == [] and ledger.in_flight == 1
    assert ledger.answered(c, result(0)) is True  # the one begun is
    assert [r.position for r in c.results] == [0]


def test_the_drain_happens_once():
    ledger = ChunkLedger(concurrency=8, chunk_size=4)
    c = chunk("a", [0, 1, 2])
    ledger.add(c)
    ledger.begin(c, c.items[0])
    ledger.give_back_unstarted()
    assert ledger.give_back_unstarted() == ([], [])
    assert ledger.in_flight == 1 and c.given_back == 2


def test_a_chunk_a_drain_settled_is_not_freed_again_when_abandoned():
    """A render thread whose preparation failed abandons its chunk; a drain that came first
    gave every item back and freed what it held. Freed twice, ``held`` went below zero and
    the drain waited its whole deadline."""
    ledger = ChunkLedger(concurrency=8, chunk_size=4)
    c = chunk("a", [0, 1])
    ledger.add(c)
    ledger.give_back_unstarted()
    assert ledger.chunks == {}
    ledger.abandon(c)
    assert (ledger.in_flight, ledger.held) == (0, 0) and ledger.all_written()


def test_an_abandoned_chunk_leaves_the_ledger_and_frees_its_room():
    ledger = ChunkLedger(concurrency=1, chunk_size=2)
    c = chunk("a", [0, 1])
    ledger.add(c)
    ledger.abandon(c)
    assert (ledger.in_flight, ledger.held, ledger.chunks) == (0, 0, {})
    assert ledger.give_back_unstarted() == ([], [])  # nothing of it to give back


def test_leases_are_due_for_the_chunks_held_longest_since_renewed():
    ledger = ChunkLedger(concurrency=8, chunk_size=4)
    old, new, done = chunk("old", [0]), chunk("new", [1]), chunk("done", [2])
    old.renewed_at = done.renewed_at = time.monotonic() - 60
    for c in (old, new, done):
        ledger.add(c)
    answer_all(ledger, done)
    write_all(ledger, done)  # written back: no longer the ledger's to renew
    assert ledger.due_for_renewal(30) == [old]


def test_under_racing_calls_write_backs_and_a_drain_each_item_is_answered_or_given_back_never_both():
    """Call threads begin and answer items (and write them back when theirs is the write-back
    scheduled) while the drain runs: every item ends either answered (its call began before
    the drain) or given back, every answer is written back exactly once, and nothing stays
    in flight, held or holding a call slot."""
    for seed in range(20):
        rng = random.Random(seed)
        ledger = ChunkLedger(concurrency=16, chunk_size=8)
        chunks = [chunk(f"c{n}", range(8 * n, 8 * n + 8)) for n in range(12)]
        for c in chunks:
            ledger.add(c)
        written: list[tuple[str, int]] = []
        written_lock = threading.Lock()

        def write_back(c: Chunk) -> None:
            while batch := ledger.take(c)[0]:
                with written_lock:
                    written.extend((c.token, r.position) for r in batch)
                ledger.written(c, batch)

        def call_thread(mine: list[tuple[Chunk, ClaimedItem]]) -> None:
            for c, item in mine:
                if rng.random() < 0.1:
                    if ledger.reused(c, [result(item.position, 0)]):
                        write_back(c)
                    continue
                if not ledger.begin(c, item):
                    continue
                time.sleep(rng.random() / 2000)
                if ledger.answered(c, result(item.position)):
                    write_back(c)

        work = [(c, item) for c in chunks for item in c.items]
        rng.shuffle(work)
        threads = [threading.Thread(target=call_thread, args=(work[n::4],)) for n in range(4)]
        for thread in threads:
            thread.start()
        time.sleep(rng.random() / 200)
        given, to_write = ledger.give_back_unstarted()
        for c in to_write:
            write_back(c)
        for thread in threads:
            thread.join()

        given_back = {(c.token, p) for c, positions in given for p in positions}
        answered = {(c.token, r.position) for c in chunks for r in c.results}
        assert not given_back & answered, seed
        assert given_back | answered == {(c.token, i.position) for c in chunks for i in c.items}, seed
        assert sorted(written) == sorted(answered), seed  # each answer written once
        assert ledger.in_flight == 0 and ledger.chunks == {} and ledger.unrecorded == 0, seed
        assert ledger.all_written(), seed


# --- the write-back window (issue 51) ------------------------------------------------------


def run_many_threads(concurrency: int, window: int, items: int = 120, callers: int = 10) -> dict[str, int]:
    """Real threads as the executor runs them: ``callers`` call threads (more than the
    concurrency) begin, call (0-2 ms) and answer items; two write-back threads take and write
    each chunk's answers (a 3 ms commit). Each change is sampled under the ledger's lock: the
    most calls in flight (counted here, between ``begin`` and ``answered``) and unrecorded seen."""
    from concurrent.futures import ThreadPoolExecutor

    ledger = ChunkLedger(concurrency=concurrency, chunk_size=8)
    ledger.window = window  # as the executor's settings set it (an attribute the ledger before issue 51 ignored)
    seen = {"calling": 0, "max_calling": 0, "max_unrecorded": 0}
    rng = random.Random(51)
    waits = [rng.uniform(0, 0.002) for _ in range(items)]

    def sample(change: int = 0) -> None:
        with ledger.lock:
            seen["calling"] += change
            seen["max_calling"] = max(seen["max_calling"], seen["calling"])
            seen["max_unrecorded"] = max(seen["max_unrecorded"], ledger.unrecorded)

    # the bound each commit records, used once it committed (none before issue 51: the concurrency)
    to_announce = getattr(ledger, "to_announce", lambda: concurrency)
    announce = getattr(ledger, "announce", lambda bound: None)

    def write_back(c: Chunk) -> None:
        while batch := ledger.take(c)[0]:
            bound = to_announce()
            time.sleep(0.003)  # the commit
            sample()
            ledger.written(c, batch)
            announce(bound)

    writers, callers_pool = ThreadPoolExecutor(2), ThreadPoolExecutor(callers)

    def call(c: Chunk, item: ClaimedItem) -> None:
        assert ledger.begin(c, item)
        sample(+1)
        time.sleep(waits[item.position])
        sample(-1)
        if ledger.answered(c, result(item.position)):
            writers.submit(write_back, c)

    chunks = [chunk(f"c{n}", range(n, n + 8)) for n in range(0, items, 8)]
    futures = []
    for c in chunks:
        ledger.add(c)
        futures += [callers_pool.submit(call, c, item) for item in c.items]
    for future in futures:
        future.result(timeout=30)
    deadline = time.monotonic() + 30
    while not ledger.all_written() and time.monotonic() < deadline:
        time.sleep(0.01)
    callers_pool.shutdown()
    writers.shutdown()
    assert ledger.all_written() and ledger.unrecorded == 0
    return seen


def test_without_a_window_no_more_calls_are_unrecorded_than_the_concurrency():
    seen = run_many_threads(concurrency=4, window=0)
    assert seen["max_unrecorded"] <= 4, seen


def test_the_window_lets_calls_begin_while_answers_wait_for_their_write_back_within_its_bound():
    """Issue 51: a call's slot is free when its answer arrives; the answered ones wait for
    their write-back in a window of ``window`` beyond the calls in flight. In flight never
    more than the concurrency, unrecorded never more than concurrency + window (the
    at-least-once bound), and the window used (the slow commits fill it)."""
    seen = run_many_threads(concurrency=4, window=3)
    assert seen["max_calling"] <= 4, seen
    assert seen["max_unrecorded"] <= 4 + 3, seen
    assert seen["max_unrecorded"] > 4, f"no call began while four answers waited for their write-back: {seen}"


def test_a_call_waits_for_the_window_when_answers_fill_it():
    ledger = ChunkLedger(concurrency=2, chunk_size=8)
    ledger.window = 1
    getattr(ledger, "announce", lambda bound: None)(3)  # a commit recorded the bound 2 + 1
    c = chunk("a", range(8))
    ledger.add(c)
    for item in c.items[:2]:
        assert ledger.begin(c, item)
        ledger.answered(c, result(item.position))
    third = threading.Event()
    threading.Thread(target=lambda: ledger.begin(c, c.items[2]) and third.set(), daemon=True).start()
    assert third.wait(5), "no call began with two answers waiting for their write-back (window 1)"
    ledger.answered(c, result(2))
    begins_only_after_a_write_back(
        ledger,
        c,
        c.items[3],
        "a fourth call began with three answers unwritten (bound 2 + 1)",
        "the write-back did not free the window",
    )


def test_a_write_back_that_never_reached_the_database_keeps_its_places_until_settled():
    """Its claims are not settled in the tally: their calls count among those a worker that
    dies may have made, so their places stay taken (the bound holds on the records)."""
    ledger = ChunkLedger(concurrency=4, chunk_size=4, window=0)
    c = chunk("a", [0, 1, 2])
    ledger.add(c)
    answer_all(ledger, c)
    batch, _ = ledger.take(c)
    ledger.written(c, batch, settled=False)
    assert (ledger.held, ledger.unrecorded, ledger.owed) == (0, 3, 3)
    ledger.settled_later(3)
    assert (ledger.unrecorded, ledger.owed) == (0, 0)


def test_the_window_is_a_setting_the_concurrency_by_default_and_range_checked():
    import pytest

    from gate.errors import UsageError
    from gate.settings import Settings

    assert Settings().window == 8 and Settings(concurrency=32).window == 32
    assert Settings(write_back_window=0).window == 0 and Settings(write_back_window=5).window == 5
    with pytest.raises(UsageError, match="PROMPTGATE_WRITE_BACK_WINDOW=-2 is out of range: allowed -1 to 4096"):
        Settings(write_back_window=-2)


def test_answers_waiting_in_the_window_keep_their_chunk_due_for_lease_renewal():
    """Until its last answer is written back (or given back) a chunk's lease is renewed
    (``Executor._renew_leases``): an answer in the window is never left to a lapsed lease."""
    ledger = ChunkLedger(concurrency=2, chunk_size=2, window=2)
    c = chunk("a", [0, 1])
    ledger.add(c)
    answer_all(ledger, c)  # both answered, neither written
    c.renewed_at -= 100
    assert ledger.due_for_renewal(10) == [c]
    batch, _ = ledger.take(c)
    ledger.written(c, batch)
    assert ledger.due_for_renewal(10) == []


def test_the_bound_on_record_grows_by_one_per_commit_while_a_call_waits_for_it():
    """The ledger lets no more calls be unrecorded than the bound a committed transaction
    recorded (``announce``): the concurrency at first, one more per commit while a call waits
    on it alone, up to concurrency + window. The figure of calls a dead worker may have made
    takes the largest bound it recorded: near the calls in flight when answers seldom wait."""
    ledger = ChunkLedger(concurrency=2, chunk_size=8, window=2)
    c = chunk("a", range(8))
    ledger.add(c)
    assert (ledger.announced, ledger.to_announce(), ledger.wants_more()) == (2, 2, False)
    for item in c.items[:2]:
        assert ledger.begin(c, item)
        ledger.answered(c, result(item.position))
    began = threading.Event()
    threading.Thread(target=lambda: ledger.begin(c, c.items[2]) and began.set(), daemon=True).start()
    assert not began.wait(0.2), "a call began beyond the bound on record"
    assert ledger.wants_more() and ledger.to_announce() == 3
    ledger.announce(3)  # the commit that recorded it
    assert began.wait(5) and ledger.announced == 3 and not ledger.wants_more()
    ledger.announce(2)  # never lower
    assert ledger.announced == 3
