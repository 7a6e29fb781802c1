"""The runtime's side of the gate without a gate: the feedback buffer keeps what it could not
send and sends it again, refuses nothing silently and stays bounded; the reporter never lets
a failure reach the caller and ends with its runtime; a key always meets the same version."""

from __future__ import annotations

import gc
import logging
import threading
import time
import weakref

from gate.calls.llm import CallResult
from gate.client.session import Unreachable
from gate.errors import Forbidden
from gate.production import feedback
from gate.production.feedback import FeedbackBuffer
from gate.production.reporter import ServedReporter
from gate.production.result import ServedResult, served_result
from gate.production.sources import ServiceSource
from gate.rollout.routing import goes_to_canary, key_share
from gate.runtime import PromptRuntime


class Gate:
    """A gate that is away for a while, then takes every batch (a plain function of the test)."""

    def __init__(self, away_for: int = 0, refuse: bool = False):
        self.away_for, self.refuse = away_for, refuse
        self.batches: list[list[dict]] = []
        self.lock = threading.Lock()

    def take(self, events: list[dict]) -> None:
        with self.lock:
            if self.refuse:
                raise Forbidden("this token's scope (read) does not allow feedback")
            if self.away_for > 0:
                self.away_for -= 1
                raise Unreachable("cannot reach the gate: connection refused")
            self.batches.append(list(events))


def events(n: int, start: int = 0) -> list[dict]:
    return [{"prompt": "p1", "version": 2, "call_id": f"c{i}", "correct": True} for i in range(start, start + n)]


def test_feedback_the_gate_could_not_take_is_sent_again_and_none_is_lost():
    gate = Gate(away_for=3)
    buffer = FeedbackBuffer(gate.take, ServiceSource.retryable, batch=100, flush_seconds=0.05)
    for event in events(450):
        buffer.add(event)
    assert buffer.stop(timeout=30)
    sent = [e["call_id"] for batch in gate.batches for e in batch]
    assert sent == [f"c{i}" for i in range(450)]  # all of them, once, in order
    assert max(len(b) for b in gate.batches) <= 100 and (buffer.sent, buffer.dropped, buffer.refused) == (450, 0, 0)


def test_feedback_the_gate_refuses_is_counted_and_dropped_not_retried_forever():
    gate = Gate(refuse=True)
    buffer = FeedbackBuffer(gate.take, ServiceSource.retryable, batch=50, flush_seconds=0.05)
    for event in events(120):
        buffer.add(event)
    assert buffer.stop(timeout=10)
    assert (buffer.sent, buffer.refused, buffer.pending()) == (0, 120, 0)


def test_the_buffer_stays_bounded_while_the_gate_is_away(caplog):
    gate = Gate(away_for=10**9)
    buffer = FeedbackBuffer(gate.take, ServiceSource.retryable, capacity=1000, batch=100, flush_seconds=0.05)
    with caplog.at_level(logging.WARNING, logger="gate.runtime"):
        for event in events(5000):
            buffer.add(event)
    time.sleep(0.3)
    assert buffer.pending() <= 1000 and buffer.dropped >= 4000
    said = [r.getMessage() for r in caplog.records if "buffer full" in r.getMessage()]
    assert said and said[0].startswith("feedback buffer full (1000 events waiting): the oldest dropped, 1 so far")
    buffer.stopping.set()


def test_at_exit_what_waits_is_sent_and_what_the_gate_did_not_take_is_counted_and_logged(caplog):
    """The exit hook (what ``atexit`` calls): every registered buffer at once, each for at
    most its exit_timeout, so two buffers on a gate that is away cost one wait, not two."""
    taking, away = Gate(away_for=2), Gate(away_for=10**9)
    sent = FeedbackBuffer(taking.take, ServiceSource.retryable, flush_seconds=60, exit_timeout=10)
    lost = [FeedbackBuffer(away.take, ServiceSource.retryable, batch=100, exit_timeout=0.6) for _ in range(2)]
    for buffer, n in ((sent, 120), (lost[0], 300), (lost[1], 50)):
        for event in events(n):
            buffer.add(event)
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="gate.runtime"):
        feedback.flush_at_exit()
    assert time.monotonic() - began < 1.1 + 5  # (the sent buffer's retries: two back-offs at most)
    assert (sent.sent, sent.unsent) == (120, 0)
    assert [(b.sent, b.unsent) for b in lost] == [(0, 300), (0, 50)]
    said = sorted((r.getMessage() for r in caplog.records if "not sent" in r.getMessage()), key=len)
    assert [s.split(":")[0] for s in said] == ["50 feedback events not sent", "300 feedback events not sent"]
    assert said[1].startswith("300 feedback events not sent: the gate did not take them within 0.6 s of this process's")
    assert "cannot reach the gate" in said[1] and all(r.levelno == logging.WARNING for r in caplog.records)
    assert not any(b in feedback._at_exit for b in (sent, *lost))  # once: a second call does nothing
    feedback.flush_at_exit()


def test_the_exit_hook_keeps_no_runtime_alive_and_close_takes_it_off():
    rt = PromptRuntime(gate_url="http://127.0.0.1:9", token="t0ken", report=False)
    assert rt.feedback_buffer in feedback._at_exit and rt.feedback_buffer.exit_timeout == 5.0
    gone, buffer_gone = weakref.ref(rt), weakref.ref(rt.feedback_buffer)
    del rt
    gc.collect()
    assert gone() is None and buffer_gone() is None
    closed = PromptRuntime(gate_url="http://127.0.0.1:9", token="t0ken", report=False, flush_at_exit=1.0)
    assert closed.close(timeout=1) and closed.feedback_buffer not in feedback._at_exit
    unhooked = PromptRuntime(gate_url="http://127.0.0.1:9", token="t0ken", report=False, flush_at_exit=None)
    assert unhooked.feedback_buffer not in feedback._at_exit
    unhooked.close()


def test_a_report_that_fails_never_reaches_the_caller_and_the_thread_ends_with_its_runtime():
    class Runtime:
        def rows(self):
            return [{"prompt": "p1", "version": 1}]

        def refresh(self):
            raise RuntimeError("the database is away")

    def sink(rows):
        raise Unreachable("cannot reach the gate")

    runtime = Runtime()
    reporter = ServedReporter(runtime.rows, runtime.refresh, sink, interval=1.0)
    reporter.interval = 0.05
    reporter.first_load("p1")
    time.sleep(0.3)
    assert reporter.failed >= 2 and reporter.sent == 0 and reporter._thread.is_alive()
    del runtime
    gc.collect()
    reporter._thread.join(2)
    assert not reporter._thread.is_alive()


def test_a_key_always_meets_the_same_version_and_ten_percent_of_keys_meet_the_canary():
    keys = [f"user-{i}" for i in range(20_000)]
    first = [goes_to_canary(k, 7, 10) for k in keys]
    assert first == [goes_to_canary(k, 7, 10) for k in keys]
    assert 0.09 < sum(first) / len(keys) < 0.11
    assert first != [goes_to_canary(k, 8, 10) for k in keys]  # another rollout, another sample of users
    assert key_share("user-1", 7) == key_share("user-1", 7) and 0 <= key_share("user-1", 7) < 100
    keyless = [goes_to_canary(None, 7, 10) for _ in range(20_000)]
    assert 0.09 < sum(keyless) / len(keyless) < 0.11


def test_a_served_result_is_the_call_result_and_says_which_version_answered():
    call = CallResult("yes", True, "yes", 12, 3, 1)
    result = served_result(call, "p1", 5, 9, "canary")
    assert isinstance(result, ServedResult) and isinstance(result, CallResult)
    assert (result.decision, result.latency_ms, result.prompt_tokens, result.version, result.rollout_id) == (
        "yes",
        12,
        3,
        5,
        9,
    )
    assert len(result.call_id) == 24 and served_result(call, "p1", 5).call_id != result.call_id
