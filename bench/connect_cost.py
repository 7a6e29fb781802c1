"""What opening a MariaDB connection costs the gate's process in CPU: ``make_engine``'s
pool filled ``--rounds`` times over (a worker warming its pool, a CLI command, the test
suite's fixtures all open connections). PyMySQL built a TLS context per connection, loading
the system's CA store (~27 ms of CPU each here); the gate shares one per process (gate/db.py).
Target: ≤ 5 ms of CPU per connection.

    python bench/connect_cost.py [--rounds 3] [--pool 10]
"""

from __future__ import annotations

import argparse
import time

from common import fresh_database, mariadb, result

TARGET_MS = 5.0


def cpu_per_connection(url: str, rounds: int, pool: int) -> tuple[float, float]:
    """(ms of this process's CPU, ms of wall) per connection opened and used once."""
    from sqlalchemy import text

    from gate.db import make_engine

    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(rounds):
        engine = make_engine(url, pool_size=pool)
        held = [engine.connect() for _ in range(pool)]
        for conn in held:
            conn.execute(text("SELECT 1"))
            conn.close()
        engine.dispose()
    n = rounds * pool
    return 1000 * (time.process_time() - cpu) / n, 1000 * (time.perf_counter() - wall) / n


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pool", type=int, default=10)
    args = ap.parse_args()
    with mariadb() as (server_url, _):
        url = fresh_database(server_url, "connect_cost")
        cpu, wall = cpu_per_connection(url, args.rounds, args.pool)
    print(f"{args.rounds * args.pool} connections: {cpu:.1f} ms of CPU and {wall:.1f} ms of wall each")
    return result("connect_cost: CPU per MariaDB connection", cpu, "ms", TARGET_MS, higher_is_better=False)


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
