"""The executor's chunk ledger (workers/execute/ledger.py), on its own: what is claimed, in flight,
answered, given back and written back, the room for the next claim, and the drain. No
database: items are plain ``ClaimedItem``s, results plain ``ItemResult``s; threads where a
race is the point."""

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


def result(position: int) -> ItemResult:
    return ItemResult(position, Verdict.MATCH)


def answer_all(ledger: ChunkLedger, c: Chunk) -> list[bool]:
    """Begin and answer each item in turn: what each ``answered`` said."""
    said = []
    for item in c.items:
        assert ledger.begin(c, item)
        said.append(ledger.answered(c, result(item.position)))
    return said


def test_an_item_is_in_flight_until_answered_and_held_until_its_chunk_is_written_back():
    ledger = ChunkLedger(concurrency=4, chunk_size=3)
    c = chunk("a", [0, 1, 2])
    ledger.add(c)
    assert (ledger.in_flight, ledger.held) == (3, 3)
    assert answer_all(ledger, c) == [False, False, True]  # the last answer makes it whole, once
    assert (ledger.in_flight, ledger.held, ledger.chunks) == (0, 3, {})
    assert not ledger.all_written()
    assert ledger.written_back(c) is True  # nothing held any more
    assert ledger.all_written() and ledger.held == 0


def test_written_back_says_whether_anything_is_still_held():
    ledger = ChunkLedger(concurrency=4, chunk_size=2)
    first, second = chunk("a", [0, 1]), chunk("b", [2, 3])
    ledger.add(first)
    ledger.add(second)
    answer_all(ledger, first)
    assert ledger.written_back(first) is False  # the second is still held
    answer_all(ledger, second)
    assert ledger.written_back(second) is True


def test_reused_items_are_begun_and_answered_together():
    ledger = ChunkLedger(concurrency=4, chunk_size=4)
    c = chunk("a", [0, 1, 2, 3])
    ledger.add(c)
    assert ledger.reused(c, []) is False  # nothing reused: nothing happens
    assert ledger.reused(c, [result(0), result(1), result(2)]) is False
    assert c.started == {0, 1, 2} and ledger.in_flight == 1
    assert ledger.calls_began == {}  # no call: no call's age
    assert ledger.begin(c, c.items[3])
    assert ledger.answered(c, result(3)) is True
    assert ledger.in_flight == 0 and "a" not in ledger.chunks


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
        answer_all(ledger, c)
    assert (ledger.in_flight, ledger.held) == (0, 12)
    started = time.monotonic()
    assert ledger.room(wait=0.2) == 0
    assert time.monotonic() - started >= 0.15
    ledger.written_back(chunks[0])
    assert ledger.room() == 2  # a chunk's room: claim


def test_a_write_back_wakes_the_claimer_waiting_for_room():
    ledger = ChunkLedger(concurrency=1, chunk_size=2)
    chunks = [chunk(str(n), [2 * n, 2 * n + 1]) for n in range(6)]
    for c in chunks:
        ledger.add(c)
        answer_all(ledger, c)
    timer = threading.Timer(0.2, ledger.written_back, [chunks[0]])
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
    for item in first.items + second.items:
        ledger.begin(first if item.position < 4 else second, item)

    def answer_six():  # 2 left in flight: room for a chunk
        for c, position in [(first, p) for p in range(4)] + [(second, 4), (second, 5)]:
            ledger.answered(c, result(position))

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
    ledger.answered(answered, result(7))
    ledger.begin(begun, begun.items[0])
    assert ledger.in_flight == 10 - 1

    given, whole = ledger.give_back_unstarted()

    assert {c.token: positions for c, positions in given} == {"calling": [2, 3], "waiting": [4, 5, 6], "answered": [8]}
    # a chunk whose last item was given back is whole: written back now, with what it has
    assert {c.token for c in whole} == {"waiting", "answered"}
    assert waiting.results == [] and [r.position for r in answered.results] == [7]
    assert set(ledger.chunks) == {"calling", "begun"}
    assert ledger.in_flight == 3  # the three calls begun and not answered
    assert ledger.held == 10  # held until written back
    # the calls in flight finish: their chunks are whole then
    assert ledger.answered(calling, result(0)) is False
    assert ledger.answered(calling, result(1)) is True
    assert ledger.answered(begun, result(9)) is True
    assert ledger.in_flight == 0 and ledger.chunks == {}
    for c in (calling, waiting, answered, begun):
        ledger.written_back(c)
    assert ledger.all_written()


def test_no_item_begins_and_no_result_is_taken_after_the_drain_gave_it_back():
    ledger = ChunkLedger(concurrency=8, chunk_size=4)
    c = chunk("a", [0, 1, 2, 3])
    ledger.add(c)
    ledger.begin(c, c.items[0])
    given, whole = ledger.give_back_unstarted()
    assert [positions for _, positions in given] == [[1, 2, 3]] and whole == []
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


def test_a_chunk_a_drain_made_whole_is_not_freed_again_when_abandoned():
    """A render thread whose preparation failed abandons its chunk; a drain that came first
    gave every item back and handed the chunk to its write-back, which frees what it holds.
    Freed twice, ``held`` went below zero and the drain waited its whole deadline."""
    ledger = ChunkLedger(concurrency=8, chunk_size=4)
    c = chunk("a", [0, 1])
    ledger.add(c)
    _, whole = ledger.give_back_unstarted()
    assert whole == [c]
    ledger.abandon(c)
    assert (ledger.in_flight, ledger.held) == (0, 2)
    assert ledger.written_back(c) is True and ledger.held == 0


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
    answer_all(ledger, done)  # whole: no longer the ledger's to renew
    assert ledger.due_for_renewal(30) == [old]


def test_under_racing_calls_and_a_drain_each_item_is_answered_or_given_back_never_both():
    """Call threads begin and answer items while the drain runs: every item ends either
    answered (its call began before the drain) or given back, each chunk is made whole
    exactly once (by an answer, a reuse or the drain), and nothing stays in flight."""
    for seed in range(20):
        rng = random.Random(seed)
        ledger = ChunkLedger(concurrency=16, chunk_size=8)
        chunks = [chunk(f"c{n}", range(8 * n, 8 * n + 8)) for n in range(12)]
        for c in chunks:
            ledger.add(c)
        whole: list[str] = []
        whole_lock = threading.Lock()

        def made_whole(c: Chunk) -> None:
            with whole_lock:
                whole.append(c.token)

        def call_thread(mine: list[tuple[Chunk, ClaimedItem]]) -> None:
            for c, item in mine:
                if rng.random() < 0.1:
                    if ledger.reused(c, [result(item.position)]):
                        made_whole(c)
                    continue
                if not ledger.begin(c, item):
                    continue
                time.sleep(rng.random() / 2000)
                if ledger.answered(c, result(item.position)):
                    made_whole(c)

        work = [(c, item) for c in chunks for item in c.items]
        rng.shuffle(work)
        threads = [threading.Thread(target=call_thread, args=(work[n::4],)) for n in range(4)]
        for thread in threads:
            thread.start()
        time.sleep(rng.random() / 200)
        given, drained_whole = ledger.give_back_unstarted()
        for c in drained_whole:
            made_whole(c)
        for thread in threads:
            thread.join()

        given_back = {(c.token, p) for c, positions in given for p in positions}
        answered = {(c.token, r.position) for c in chunks for r in c.results}
        assert not given_back & answered, seed
        assert given_back | answered == {(c.token, i.position) for c in chunks for i in c.items}, seed
        assert sorted(whole) == sorted(c.token for c in chunks), seed  # each once
        assert ledger.in_flight == 0 and ledger.chunks == {}, seed
        assert ledger.held == 8 * len(chunks)
        for c in chunks:
            ledger.written_back(c)
        assert ledger.all_written()
