"""The bare ceiling P4 is held against: what this MariaDB does with nothing of the gate
but its claim and its write-back, on the gate's own ``prompt_run_item`` table.

Two processes, each looping on its own connection:

1. one transaction: ``SELECT position … WHERE run_id = ? AND verdict = 'PENDING' AND
   lease_until <= NOW(6) ORDER BY lease_until LIMIT 256 FOR UPDATE SKIP LOCKED``, then
   ``UPDATE … SET lease_token, lease_until, attempt = attempt + 1`` of those rows;
2. one transaction: ``UPDATE … SET verdict = CASE position … END, actual_decision = CASE
   position … END, lease_token = NULL, lease_until = EPOCH WHERE run_id = ? AND position
   IN (…) AND lease_token = ? AND lease_until > NOW(6)``.

No model, no render, no answers kept, no Python of the gate on the path: items per second
is the most the claim pattern can give on this server (durable commits, as every bench).

    python bench/db_bare_ceiling.py [--items 20000] [--chunk-size 256] [--processes 2]

``db_ceiling.py`` runs this on the same server in the same run and prints its ratio.
"""

from __future__ import annotations

import argparse
import multiprocessing
import secrets
import tempfile
import time
from urllib.parse import urlsplit

from common import gated_dataset, mariadb, mariadb_process, result, rules_spec, server_seconds

CLAIM = (
    "SELECT position FROM prompt_run_item WHERE run_id = %s AND verdict = 'PENDING' "
    "AND lease_until <= UTC_TIMESTAMP(6) ORDER BY lease_until LIMIT %s FOR UPDATE SKIP LOCKED"
)
LEASE = (
    "UPDATE prompt_run_item SET lease_token = %s, lease_until = TIMESTAMPADD(SECOND, 60, UTC_TIMESTAMP(6)), "
    "attempt = attempt + 1 WHERE run_id = %s AND position IN ({})"
)
WRITE = (
    "UPDATE prompt_run_item SET verdict = CASE position {verdicts} END, actual_decision = CASE position "
    "{answers} END, lease_token = NULL, lease_until = '2000-01-01 00:00:00' WHERE run_id = %s AND position "
    "IN ({positions}) AND lease_token = %s AND lease_until > UTC_TIMESTAMP(6)"
)


def connect(url: str):
    import pymysql

    parts = urlsplit(url)
    return pymysql.connect(
        host=parts.hostname,
        port=parts.port or 3306,
        user=parts.username or "root",
        password=parts.password or "",
        database=parts.path.lstrip("/"),
        autocommit=False,
    )


def claimer(url: str, run_id: int, chunk: int, scored) -> None:
    """One process: claim, lease, write back, until nothing is left to claim."""
    conn = connect(url)
    cur = conn.cursor()
    while True:
        cur.execute(CLAIM, (run_id, chunk))
        positions = [row[0] for row in cur.fetchall()]
        if not positions:
            conn.rollback()
            break
        token = secrets.token_hex(16)
        listed = ",".join(str(p) for p in positions)
        cur.execute(LEASE.format(listed), (token, run_id))
        conn.commit()
        verdicts = " ".join(f"WHEN {p} THEN '{'MATCH' if p % 3 else 'MISMATCH'}'" for p in positions)
        answers = " ".join(f"WHEN {p} THEN '{'yes' if p % 2 else 'no'}'" for p in positions)
        cur.execute(WRITE.format(verdicts=verdicts, answers=answers, positions=listed), (run_id, token))
        written = cur.rowcount
        conn.commit()
        with scored.get_lock():
            scored.value += written
    conn.close()


def materialized_run(server_url: str, database: str, items: int) -> tuple[str, int]:
    """A fresh gate database with one run of ``items`` items materialized: (url, run id)."""
    import threading

    from gate.store.runs import runs_of_update
    from workers.materialize import Materializer

    with tempfile.TemporaryDirectory() as tmp:
        url, gate = gated_dataset(server_url, database, tmp, items, "0.99")
    uid = gate.submit(rules_spec("p1"), "check", reuse=False)
    materializer = Materializer(gate.engine, gate.settings, threading.Event())
    while materializer.poll() == 0:
        pass
    with gate.engine.connect() as conn:
        (run_id,) = [r.id for r in runs_of_update(conn, uid)]
    gate.close()
    return url.replace("mysql+pymysql://", "mysql://"), run_id


def bare_ceiling(
    server_url: str, items: int, chunk: int = 256, processes: int = 2, database: str = "bench_bare"
) -> float:
    """Items per second of the bare claim pattern on a fresh run of ``items`` items."""
    url, run_id = materialized_run(server_url, database, items)
    scored = multiprocessing.Value("q", 0)
    procs = [multiprocessing.Process(target=claimer, args=(url, run_id, chunk, scored)) for _ in range(processes)]

    server = mariadb_process(urlsplit(url).port)
    server_cpu, started = server_seconds(server), time.monotonic()
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    wall = time.monotonic() - started
    server_cpu = server_seconds(server) - server_cpu
    if scored.value != items:
        raise RuntimeError(f"the bare loop scored {scored.value} of {items} items")
    print(
        f"bare ceiling: items={items} chunk={chunk} processes={processes} wall={wall:.2f}s "
        f"rate={items / wall:.0f} items/s; MariaDB CPU {1e6 * server_cpu / items:.0f} µs/item",
        flush=True,
    )
    return items / wall


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=20000)
    ap.add_argument("--chunk-size", type=int, default=256)
    ap.add_argument("--processes", type=int, default=2)
    args = ap.parse_args()
    with mariadb() as (server_url, _):
        rate = bare_ceiling(server_url, args.items, args.chunk_size, args.processes)
    return result(
        "P4 bare ceiling (claim + one guarded UPDATE per chunk, no gate)", rate, "items/s", 10000, higher_is_better=True
    )


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
