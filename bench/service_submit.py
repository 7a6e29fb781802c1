"""Submissions through the service: one `promptgate serve` process (a real subprocess on a
free port, on a fresh MariaDB database) and 50 concurrent clients in their own process,
each a loop of `POST /v1/updates` (a JSON body with the prompt; mode check with a
submit-scope token, or `--mode apply`, which takes an admin token). As a monorepo's CI
does, they submit many different prompts: 200 prompt names mapped to one small dataset,
taken in turn, each with its source key, so two submissions of one prompt (which
serialize on its lock) are rare, and each after the first round supersedes (cancels) its
prompt's open one, as a new push to a pull request does. No workers: the updates stay
open. Submissions/s sustained over 20 s after a 3 s warm-up (completed in the window /
its length), with p50/p99 latency of the requests that started in it. Target ≥ 50/s.

    python bench/service_submit.py [--clients 50] [--prompts 200] [--seconds 20] [--warmup 3] [--mode check]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import multiprocessing
import tempfile
import time
from pathlib import Path

import httpx2
from common import gated_dataset, mariadb, result, rules_spec

from gate.verdict.stats import percentile

SCOPE = {"check": "submit", "apply": "admin"}  # the scope a token needs for each mode


# --- the client process -----------------------------------------------------------------


async def _submitter(client, bodies: list[dict], turn, until: float, records: list) -> None:
    """Submit the next prompt in turn until ``until``: (start, end, HTTP status, the body
    of a refusal) each."""
    while time.monotonic() < until:
        body = bodies[next(turn) % len(bodies)]
        started = time.monotonic()
        response = await client.post("/v1/updates", json=body)
        records.append(
            (
                started,
                time.monotonic(),
                response.status_code,
                None if response.status_code == 202 else response.text[:300],
            )
        )


async def _submitters(url: str, token: str, bodies: list[dict], clients: int, seconds: float) -> list:
    limits = httpx2.Limits(max_connections=clients, max_keepalive_connections=clients)
    records: list = []
    async with httpx2.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, limits=limits, timeout=60
    ) as client:
        until, turn = time.monotonic() + seconds, itertools.count()
        await asyncio.gather(*(_submitter(client, bodies, turn, until, records) for _ in range(clients)))
    return records


def client_process(pipe, url: str, token: str, bodies: list[dict], clients: int, seconds: float) -> None:
    pipe.send(asyncio.run(_submitters(url, token, bodies, clients, seconds)))


# --- the bench --------------------------------------------------------------------------


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--prompts", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--mode", choices=("check", "apply"), default="check")
    args = ap.parse_args()
    from support.service_harness import Service

    names = [f"svc{i:03d}" for i in range(args.prompts)]
    bodies = [
        {"prompt": rules_spec(name).to_config(), "mode": args.mode, "source_key": f"release-{name}"} for name in names
    ]
    with mariadb() as (server_url, _), tempfile.TemporaryDirectory() as tmp:
        url, gate = gated_dataset(server_url, "bench_submit", tmp, 20, "0.5", prompts=names)
        service = Service(url, Path(tmp))
        try:
            ctx = multiprocessing.get_context("spawn")
            ours, theirs = ctx.Pipe()
            token = service.tokens[SCOPE[args.mode]]
            client = ctx.Process(
                target=client_process,
                args=(theirs, service.url, token, bodies, args.clients, args.warmup + args.seconds),
            )
            client.start()
            records = ours.recv()
            client.join(30)
            stored = sum(gate.fleet().updates.values())
        finally:
            service.stop()
            gate.close()
    return report(records, stored, args)


def report(records: list, stored: int, args) -> bool:
    accepted = [r for r in records if r[2] == 202]
    refused = len(records) - len(accepted)
    if refused or stored != len(accepted):
        first = next((r for r in records if r[2] != 202), None)
        print(
            f"{refused} submissions refused (the first: {first[2:] if first else '-'}); {len(accepted)} accepted, "
            f"{stored} updates stored"
        )
    name = f"service submissions/s, {args.clients} clients, one server process"
    if not accepted:
        return result(name, 0, "submissions/s", 50, higher_is_better=True)
    # The client's clock starts after its process has imported httpx2: the window is set
    # from its first request, not from this process's start.
    start = min(r[0] for r in records) + args.warmup
    end = start + args.seconds
    done = [r for r in accepted if start <= r[1] < end]
    latencies = sorted(r[1] - r[0] for r in accepted if start <= r[0] < end)
    rate = len(done) / args.seconds
    print(
        f"{len(records)} submissions by {args.clients} clients over {args.prompts} prompts ({args.mode}); "
        f"{len(done)} completed in the {args.seconds:g} s window after {args.warmup:g} s of warm-up: {rate:.1f}/s; "
        f"latency p50 {percentile(latencies, 50) * 1000:.0f} ms, p99 {percentile(latencies, 99) * 1000:.0f} ms, "
        f"max {latencies[-1] * 1000:.0f} ms"
    )
    ok = result(name, rate, "submissions/s", 50, higher_is_better=True)
    return ok and not refused and stored == len(accepted)


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
