"""The service's long-poll waits at scale: one `promptgate serve` process (a real subprocess
on a free port, on a fresh MariaDB database) and 1,000 concurrent waiters
(`GET /v1/updates/{id}/wait?timeout=60`, 100 on each of 10 open updates) held open by a
client in its own process (raw asyncio streams on keep-alive connections, as an HTTP
client holds them: a heavier client's own cost would add to the wake latency measured).

(a) What the waiting costs the database: once the server's /metrics counts all 1,000 as
waiting, MariaDB `Questions` read at the start and end of a quiet window of 10 s, minus
the one read of this script in between. Target ≤ 5 queries/s.
(b) Wake latency: the updates turn terminal (`Gate.cancel`, a guarded UPDATE and its commit,
at a random moment of the watcher's beat); per waiter, the time from its update's commit
(recorded when the commit returned) to its whole response received. p99 over all waiters of
all rounds (each round: 10 fresh updates, 1,000 fresh waiters, all cancelled together, so
all 1,000 wake at once). Target p99 ≤ 0.5 s.

The LAST line is the wake latency's RESULT, PASS only if both targets are met; the query
rate's verdict is printed above it.

    python bench/service_waiters.py [--waiters 1000] [--updates 10] [--rounds 3] [--quiet-seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import resource
import tempfile
import time
from pathlib import Path

from common import gated_dataset, mariadb, rules_spec

from gate.verdict.stats import percentile

# --- the client process -----------------------------------------------------------------


async def _one_waiter(port: int, request: bytes, update_id: int, sent: list) -> tuple[int, int, float, int]:
    """One long-poll on its own keep-alive connection, as an HTTP client keeps it (closed
    once the response is in): (update id, HTTP status, time the whole response was in,
    body bytes)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        sent.append(update_id)
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = next(
            int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
        )
        body = await reader.readexactly(length)
        return update_id, status, time.monotonic(), len(body)
    finally:
        writer.close()


async def _waiters(port: int, token: str, update_ids: list[int], per_update: int, timeout: int, pipe) -> list:
    sent: list[int] = []
    requests = {
        uid: (
            f"GET /v1/updates/{uid}/wait?timeout={timeout} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\n\r\n"
        ).encode()
        for uid in update_ids
    }
    tasks = []
    for uid in update_ids:
        for _ in range(per_update):
            tasks.append(asyncio.create_task(_one_waiter(port, requests[uid], uid, sent)))
            if len(tasks) % 100 == 0:
                await asyncio.sleep(0.01)  # connect in waves: no SYN burst beyond the listen backlog
    while len(sent) < len(tasks) and not any(t.done() for t in tasks):
        await asyncio.sleep(0.01)
    pipe.send(("sent", len(sent), sum(t.done() for t in tasks)))
    return await asyncio.gather(*tasks, return_exceptions=True)


def client_process(pipe, port: int, token: str, update_ids: list[int], per_update: int, timeout: int) -> None:
    """Open the waiters, say when every request is sent, then send back what each received."""
    results = asyncio.run(_waiters(port, token, update_ids, per_update, timeout, pipe))
    pipe.send(("done", [r if isinstance(r, tuple) else repr(r)[:200] for r in results]))


# --- the bench --------------------------------------------------------------------------


def raise_open_files(needed: int) -> None:
    """1,000 sockets in the client and as many in the server (which inherits the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, hard), hard))


def questions(conn) -> int:
    """MariaDB's count of statements clients sent (one more: this read)."""
    cur = conn.cursor()
    cur.execute("SHOW GLOBAL STATUS LIKE 'Questions'")
    value = int(cur.fetchone()[1])
    cur.close()
    return value


def quiet_query_rate(gate, seconds: float) -> float:
    """Statements per second the server's database received over ``seconds``, on one raw
    connection of this script (no pool ping, no ROLLBACK on return): its second read is
    the one statement of its own in the window."""
    conn = gate.engine.raw_connection()
    try:
        before = questions(conn)
        time.sleep(seconds)
        after = questions(conn)
    finally:
        conn.close()
    return (after - before - 1) / seconds


def wait_registered(service, waiters: int, timeout: float = 60) -> None:
    """Until the server's /metrics counts every waiter as waiting."""
    deadline = time.monotonic() + timeout
    with service.client("read") as client:
        while True:
            text = client.get("/metrics").text
            found = next(
                (
                    float(line.split()[1])
                    for line in text.splitlines()
                    if line.startswith("promptgate_longpoll_waiters ")
                ),
                0,
            )
            if found >= waiters:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {found:g} of {waiters} waiters registered in {timeout:g} s")
            time.sleep(0.2)


def one_round(gate, service, prompts: list[str], args, measure_quiet: bool) -> tuple[list[float], float | None]:
    """Open updates, their waiters, (the quiet window), then cancel them all: the waiters'
    wake latencies and the query rate."""
    update_ids = [gate.submit(rules_spec(name), "check", {"key": f"waiters-{time.monotonic_ns()}"}) for name in prompts]
    per_update = args.waiters // len(update_ids)
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    client = ctx.Process(
        target=client_process, args=(theirs, service.port, service.tokens["submit"], update_ids, per_update, 60)
    )
    client.start()
    try:
        _sent, sent, early = ours.recv()
        if early or sent != per_update * len(update_ids):
            raise RuntimeError(f"{sent} waiters sent, {early} answered before any update ended")
        wait_registered(service, sent)
        time.sleep(args.settle)  # the /metrics read's queries (and any straggler) out of the window
        rate = quiet_query_rate(gate, args.quiet_seconds) if measure_quiet else None
        time.sleep(random.uniform(0, 0.25))  # a random moment of the watcher's beat
        committed = {}
        for uid in update_ids:
            gate.cancel(uid, "bench: end of the wait")
            committed[uid] = time.monotonic()
        _done, results = ours.recv()
        client.join(30)
    finally:
        if client.is_alive():
            client.kill()
    failed = [r for r in results if not isinstance(r, tuple) or r[1] != 200]
    if failed:
        raise RuntimeError(f"{len(failed)} waiters failed, e.g. {failed[:3]}")
    latencies = sorted(at - committed[uid] for uid, _status, at, _n in results)
    span = max(at for *_, at, _n in results) - min(at for *_, at, _n in results)
    print(
        f"round: {len(results)} waiters on {len(update_ids)} updates; wake p50 {percentile(latencies, 50):.3f} s, "
        f"p99 {percentile(latencies, 99):.3f} s, max {latencies[-1]:.3f} s, first to last response {span:.3f} s",
        flush=True,
    )
    return latencies, rate


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--waiters", type=int, default=1000)
    ap.add_argument("--updates", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quiet-seconds", type=float, default=10)
    ap.add_argument("--settle", type=float, default=1)
    args = ap.parse_args()
    raise_open_files(2 * args.waiters + 512)
    from support.service_harness import Service

    prompts = [f"wait{i:02d}" for i in range(args.updates)]
    with mariadb() as (server_url, _), tempfile.TemporaryDirectory() as tmp:
        url, gate = gated_dataset(server_url, "bench_waiters", tmp, 20, "0.5", prompts=prompts)
        # every waiter holds the one submit token: lift the per-token cap of long-polls (100) past them
        service = Service(url, Path(tmp), "--max-waits-per-token", str(args.waiters + 10))
        try:
            latencies, rate = [], None
            for i in range(args.rounds):
                got, measured = one_round(gate, service, prompts, args, measure_quiet=i == 0)
                latencies += got
                rate = measured if measured is not None else rate
        finally:
            service.stop()
            gate.close()
    return report(sorted(latencies), rate, args)


def report(latencies: list[float], rate: float, args) -> bool:
    p99 = percentile(latencies, 99)
    rate_ok, wake_ok = rate <= 5, p99 <= 0.5
    print(
        f"database queries/s while {args.waiters} waiters wait: {rate:.2f} (over {args.quiet_seconds:g} s; "
        f"target <= 5) ratio {rate / 5:.3f} {'PASS' if rate_ok else 'FAIL'}"
    )
    print(
        f"wake latency over {len(latencies)} waiters ({args.rounds} rounds): p50 {percentile(latencies, 50):.3f} s, "
        f"p90 {percentile(latencies, 90):.3f} s, p99 {p99:.3f} s, max {latencies[-1]:.3f} s"
    )
    ok = rate_ok and wake_ok
    print(
        f"RESULT service long-poll p99 wake latency, {args.waiters} waiters (and {rate:.2f} queries/s while they "
        f"wait, target <= 5): {p99:.3f} s (target <= 0.5) ratio {p99 / 0.5:.3f} {'PASS' if ok else 'FAIL'}",
        flush=True,
    )
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
