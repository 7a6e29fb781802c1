"""Import and materialize throughput and memory, on MariaDB, for 10,000 and 100,000 rows:

* import: a CSV of N rows registered as a dataset version (read, hashed, written by
  ``gate.datasets.importer``), in this process. Target: ≥ 50,000 rows/s at 100,000 rows.
* materialize: a run's items copied from that stored version by the materialize worker in
  its own process (server-side ``INSERT … SELECT`` per page). Targets: ≥ 100,000 rows/s at
  100,000 rows; the worker's peak RSS at 100,000 within ±20 % of the one at 10,000.

    python bench/materialize.py [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, fresh_database, mariadb, result, rules_spec, write_dataset

CHILD = r"""
import json, resource, sys, threading, time
sys.path[:0] = [sys.argv[3]]
from gate.domain import Gate
from workers.materialize import Materializer
gate = Gate.connect(sys.argv[1])
m = Materializer(gate.engine, gate.settings, threading.Event())
started = time.monotonic()
while m.poll() == 0:
    pass
wall = time.monotonic() - started
print(json.dumps({"wall": wall, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def run_size(server_url: str, n: int, tmp: Path) -> dict:
    from gate.domain import Gate

    url = fresh_database(server_url, f"bench_mat_{n}")
    gate = Gate.connect(url, upgrade=True)
    path = write_dataset(tmp / f"d{n}.csv", n)
    started = time.monotonic()
    gate.register_dataset("d", str(path))
    import_wall = time.monotonic() - started
    gate.map_dataset("p1", "d", "0.5")
    uid = gate.submit(rules_spec("p1"), "check")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, url, str(uid), str(ROOT)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    run = gate.status(uid).runs[0]
    assert run.row_count == n and run.total == n, (run.row_count, run.total)
    gate.close()
    figures["rows_per_s"] = n / figures["wall"]
    figures["import_rows_per_s"] = n / import_wall
    print(
        f"rows={n} import {import_wall:.2f}s ({figures['import_rows_per_s']:.0f} rows/s); materialize "
        f"{figures['wall']:.2f}s ({figures['rows_per_s']:.0f} rows/s), peak_rss={figures['maxrss_kb'] / 1024:.1f} MiB"
    )
    return figures


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with mariadb() as (server_url, _), tempfile.TemporaryDirectory() as tmp:
        figures = {n: run_size(server_url, n, Path(tmp)) for n in sizes}
    small, big = figures[sizes[0]], figures[sizes[-1]]
    growth = big["maxrss_kb"] / small["maxrss_kb"]
    print(f"peak RSS {sizes[-1]} rows / {sizes[0]} rows = {growth:.3f} (target within 0.8..1.2)")
    mem_ok = 0.8 <= growth <= 1.2
    import_ok = result("import rows/s", big["import_rows_per_s"], "rows/s", 50000, higher_is_better=True)
    rate_ok = result("materialize rows/s", big["rows_per_s"], "rows/s", 100000, higher_is_better=True)
    return import_ok and rate_ok and mem_ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
