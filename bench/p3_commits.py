"""P3 commits per item: durable commits (MariaDB Com_commit and Handler_commit, read
before and after) per scored item over a whole gate run. Target: ≤ 0.1.

    python bench/p3_commits.py [--items 2000] [--latency-ms 20] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import tempfile

from common import (gated_dataset, mariadb, model_server, result, rules_spec, server_status, stop,
                    wait_for_workers, worker_processes)


def main() -> bool:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--latency-ms", type=float, default=20)
    ap.add_argument("--concurrency", type=int, default=32)
    args = ap.parse_args()
    with mariadb() as (server_url, _), model_server(args.latency_ms) as base, \
            tempfile.TemporaryDirectory() as tmp:
        url, gate = gated_dataset(server_url, "bench_p3", tmp, args.items, "0.99")
        procs = worker_processes(url, base, 1, args.concurrency)
        try:
            wait_for_workers(gate, 1)
            names = ("Com_commit", "Handler_commit", "Innodb_log_writes")
            before = server_status(gate.engine, *names)
            uid = gate.submit(rules_spec("p1"), "apply", reuse=False)
            report = gate.wait(uid, timeout=300, poll=1.0)
            after = server_status(gate.engine, *names)
        finally:
            stop(procs)
        scored = sum(r.scored for r in report.runs)
        com = after["Com_commit"] - before["Com_commit"]
        handler = after["Handler_commit"] - before["Handler_commit"]
        fsyncs = after["Innodb_log_writes"] - before["Innodb_log_writes"]
        print(f"items={args.items} scored={scored} status={report.status} Com_commit={com} ({com / scored:.3f}/item) "
              f"Handler_commit={handler} ({handler / scored:.3f}/item) redo log writes={fsyncs} ({fsyncs / scored:.3f}/item)")
        print("Com_commit counts COMMIT statements: every write transaction (and the empty claim polls). "
              "Handler_commit also counts the end of every read-only transaction (status polls, run lists): "
              "100 read-only checkouts add 100 to it and 0 to Com_commit here, and no redo flush.")
        return result("P3 durable commits (Com_commit) per scored item", com / scored, "commits/item", 0.1,
                      higher_is_better=False)


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
