"""The shared activity probe of a worker process: an idle process asks the database one
question per interval whatever its number of roles, and the probe that sees a new
submission wakes every role at once, so pickup takes at most about one interval."""

from __future__ import annotations

import threading
import time

import pytest
from support.helpers import setup_gate, spec

from gate.domain import Gate
from gate.store.runs import get_run
from gate.store.updates import any_open_update
from workers import poller
from workers.supervisor import ROLES, build_pollers

INTERVAL = 0.3


@pytest.fixture
def process(gate, monkeypatch):
    """Every role of one process, on threads, and the times of its probes."""
    probes = []
    original, waiting = any_open_update, poller.probe_or_wait

    def counted(conn):
        probes.append(time.monotonic())
        return original(conn)

    def counted_wait(conn, wait_for):  # MariaDB: the probe that waits for a knock in its statement
        probes.append(time.monotonic())
        return waiting(conn, wait_for)

    monkeypatch.setattr(poller, "any_open_update", counted)
    monkeypatch.setattr(poller, "probe_or_wait", counted_wait)
    g = Gate(gate.engine, gate.settings.with_(idle_probe_interval=INTERVAL))
    stop = threading.Event()
    pollers = build_pollers(g.engine, g.settings, stop, ROLES, concurrency=2)
    threads = [threading.Thread(target=p.run, daemon=True) for p in pollers]
    yield g, probes, threads
    stop.set()
    for p in pollers:
        p.wake.set()
    for t in threads:
        t.join(10)


def test_an_idle_process_probes_once_per_interval_for_all_its_roles(process):
    g, probes, threads = process
    for t in threads:
        t.start()
    time.sleep(0.5)
    probes.clear()
    time.sleep(2.0)
    assert 2.0 / INTERVAL - 2 <= len(probes) <= 2.0 / INTERVAL + 2, len(probes)  # not one per role


def test_a_submission_is_picked_up_within_about_one_interval(process, tmp_path):
    g, probes, threads = process
    setup_gate(g, tmp_path, datasets=(("d1", 4, "0.5"),))
    for t in threads:
        t.start()
    time.sleep(0.5)
    pickups = []
    for i in range(3):
        uid = g.submit(spec(), "check", {"key": f"k{i}"})
        submitted = time.monotonic()
        run_id = g.status(uid).runs[0].run_id
        while time.monotonic() - submitted < 5:
            with g.engine.connect() as conn:
                if get_run(conn, run_id).attempt > 0:
                    break
            time.sleep(0.01)
        pickups.append(time.monotonic() - submitted)
        g.cancel(uid)
        time.sleep(INTERVAL * 2)  # idle again: the probe says "no work" before the next one
    assert max(pickups) <= INTERVAL + 0.25, pickups


def test_empty_polls_back_off_and_start_over_when_new_work_opens(gate):
    """Another process's first page follows soon after a submission: a role that backed
    off during the last run must not sleep a whole poll_max_interval before seeing it."""
    from workers.poller import Activity, Poller

    class Idle(Poller):
        def poll(self) -> float:
            return self.idle()

    g = Gate(gate.engine, gate.settings.with_(poll_interval=0.05, poll_max_interval=1.0))
    activity = Activity(g.engine, g.settings.idle_probe_interval)
    try:
        poller = Idle(g.engine, g.settings, threading.Event(), activity)
        delays = [poller.poll() for _ in range(10)]
        assert delays[0] == 0.05 and delays[-1] == 1.0 and delays == sorted(delays)
        activity.opened += 1  # the probe saw a new submission
        assert poller.poll() == 0.05
    finally:
        activity.close()


def test_probe_intervals_vary_so_processes_started_together_drift_apart(gate):
    from workers.poller import Activity

    activity = Activity(gate.engine, 0.25)
    try:
        intervals = [activity._next_interval() for _ in range(200)]
    finally:
        activity.close()
    assert 0.1875 <= min(intervals) < 0.2 and 0.3 < max(intervals) <= 0.3125
    assert abs(sum(intervals) / len(intervals) - 0.25) < 0.01  # the same cost on average
