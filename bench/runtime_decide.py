"""The runtime's own cost per `decide`, beyond the model call, with what issue 39 adds on:
fleet reporting (the reporter thread, refreshing and reporting every second) and canary
routing (a rollout in progress, 10 % of keys to the canary), through the service (a read
token, conditional refreshes).

A real `PromptRuntime` calls the local model server (its own process, no latency) on a
prompt live as a canary beside its stable version, with a user's key each time. Each call
is timed whole, and the model call inside it (``gate.calls.llm.call_prompt``, wrapped by a
timer around the very function the runtime calls) is subtracted: what remains is the
runtime's own work (the cache check, routing by the key's hash, the result that says which
version answered). Target: p50 ≤ 50 µs; p99 printed.

    python bench/runtime_decide.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from common import gated_dataset, mariadb, model_server, result

import gate.runtime
from gate.verdict.stats import percentile

ROLLOUT = {"canary_percent": 10, "min_feedback": 10_000_000, "max_drop": 0.02, "confidence": 0.95, "max_hours": 48}


def timed_call_prompt(spent: list):
    real = gate.runtime.call_prompt

    def call(*args, **kwargs):
        started = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - started)

    return call


def count_call_path_refreshes(runtime, on_call_path: list) -> None:
    """Count the refreshes made on the calling thread (not the reporter's): the ones a call
    waited for."""
    import threading

    fetch, caller = runtime._source.fetch, threading.current_thread()

    def counted(*args, **kwargs):
        if threading.current_thread() is caller:
            on_call_path.append(1)
        return fetch(*args, **kwargs)

    runtime._source.fetch = counted


def measure(runtime, calls: int) -> tuple[list[float], list[float]]:
    """(the runtime's own seconds per decide, seconds per feedback call)."""
    inner: list[float] = []
    gate.runtime.call_prompt = timed_call_prompt(inner)
    own, feedback = [], []
    for i in range(calls):
        started = time.perf_counter()
        answer = runtime.decide("p1", {"text": "alpha message"}, key=f"user-{i % 5000}")
        own.append(time.perf_counter() - started - inner[-1])
        started = time.perf_counter()
        runtime.feedback(answer, correct=True)
        feedback.append(time.perf_counter() - started)
    return own, feedback


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args()
    from support.canary import prompt_spec
    from support.service_harness import Service

    from gate.runtime import PromptRuntime
    from workers.supervisor import run_until_terminal

    with mariadb() as (server_url, _), model_server(0) as base, tempfile.TemporaryDirectory() as tmp:
        os.environ.update(OPENAI_BASE_URL=base, OPENAI_API_KEY="bench")
        url, g = gated_dataset(server_url, "bench_runtime", tmp, 20, "0.5")
        g.set_rollout("p1", ROLLOUT)
        run_until_terminal(g, [g.submit(prompt_spec("stable"), "apply")])
        canary = g.submit(prompt_spec("canary"), "apply")
        run_until_terminal(g, [canary])
        assert g.rollout_of_update(canary)["status"] == "CANARY"
        service = Service(url, Path(tmp))
        runtime = PromptRuntime(
            gate_url=service.url, token=service.tokens["read"], feedback_token=service.tokens["feedback"], ttl=1.0
        )
        try:
            measure(runtime, 500)  # warm: connections, the first load, the code paths
            waited: list = []
            count_call_path_refreshes(runtime, waited)
            own, feedback = measure(runtime, args.calls)
            routed = runtime.load("p1").canary is not None
            reports = runtime.reporter.sent
        finally:
            runtime.close()
            service.stop()
            g.close()
    own.sort()
    feedback.sort()
    us = [x * 1e6 for x in own]
    print(
        f"decide, the runtime's own cost over {len(own)} calls (canary routing {'on' if routed else 'OFF'}, "
        f"{reports} reports sent meanwhile): p50 {percentile(us, 50):.1f} µs, p90 {percentile(us, 90):.1f} µs, "
        f"p99 {percentile(us, 99):.1f} µs, max {us[-1]:.0f} µs; {len(waited)} calls refreshed the prompt "
        "themselves (the reporter's thread refreshes it a little before a call would)"
    )
    fb = [x * 1e6 for x in feedback]
    print(f"feedback (buffered): p50 {percentile(fb, 50):.1f} µs, p99 {percentile(fb, 99):.1f} µs")
    ok = routed and reports > 0
    return result("runtime decide p50 own cost (beyond the model call)", percentile(us, 50), "µs", 50, False) and ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
