"""The CPU of one executor write-back, part by part, on a throwaway MariaDB: this process's
CPU (the gate's Python, SQLAlchemy, PyMySQL) and the server's, per write-back of
``--batch`` results, for each statement of ``WriteBacks._commit`` alone in its own
transaction and all of them together; what P4's fresh and kept modes pay per write-back
(with the at-least-once bound and an instant model, a write-back carries ~15 results).

    python bench/write_back_cpu.py [--batch 16] [--rounds 300]

Each round claims ``--batch`` fresh items (so each UPDATE writes its rows, as a real
write-back does) outside the clock, then times the part. The tally is timed in both forms
where the checkout has both: ``add_tally(positions=...)`` (an INSERT ... SELECT re-reading
the items just written) and ``add_tally(outcomes=...)`` (counted from the results in hand).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from common import gated_dataset, mariadb, mariadb_process, rules_spec, server_seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--profile", default="", help="a part's name: cProfile's top functions of it")
    args = ap.parse_args()
    from gate.db import transaction
    from gate.records import ItemResult
    from gate.states import Verdict
    from gate.store.answers import save_answers
    from gate.store.items import claim_items, write_item_results
    from gate.store.stops import add_tally, stripe_of
    from workers.execute.results import new_answers
    from workers.materialize import Materializer

    try:
        from workers.execute.results import tally_outcomes
    except ImportError:
        tally_outcomes = None

    items = args.batch * args.rounds * 8
    with mariadb() as (server_url, _), tempfile.TemporaryDirectory() as tmp:
        _, gate = gated_dataset(server_url, "bench_write_back_cpu", Path(tmp), items)
        uid = gate.submit(rules_spec("p1"), "apply")
        run_id = gate.status(uid).runs[0].run_id
        materializer = Materializer(gate.engine, gate.settings, threading.Event())
        while materializer.poll() == 0:
            pass
        server = mariadb_process(gate.engine.url.port)
        engine = gate.engine

        def claimed():
            token, chunk = transaction(engine, lambda conn: claim_items(conn, run_id, args.batch, 300, 3))
            results = [
                ItemResult(
                    i.position,
                    Verdict.MATCH,
                    actual_decision=i.expected_decision,
                    raw_output=i.expected_decision,
                    latency_ms=0,
                    prompt_tokens=1,
                    completion_tokens=1,
                    answer_key=f"{run_id}-{i.position}-{token[:8]}",
                    calls=1,
                )
                for i in chunk
            ]
            return token, chunk, results

        def parts(token, chunk, results):
            stripe = stripe_of(token)
            tally_old = lambda conn: add_tally(  # noqa: E731
                conn, run_id, stripe, [r.position for r in results], None, len(results), settled=len(results)
            )
            found = {
                "empty transaction": lambda conn: None,
                "write_item_results": lambda conn: write_item_results(conn, run_id, token, results),
                "save_answers": lambda conn: save_answers(conn, new_answers(results, uid, run_id)),
                "tally, re-read (positions)": tally_old,
            }
            if tally_outcomes is not None:
                found["tally, in hand (outcomes)"] = lambda conn: add_tally(
                    conn,
                    run_id,
                    stripe,
                    None,
                    None,
                    len(results),
                    settled=len(results),
                    outcomes=tally_outcomes(results, chunk),
                )

            def everything(conn):
                write_item_results(conn, run_id, token, results)
                save_answers(conn, new_answers(results, uid, run_id))
                (found.get("tally, in hand (outcomes)") or tally_old)(conn)

            found["the whole write-back"] = everything
            return found

        names = list(parts("0" * 32, [], []))
        spent = {name: [0.0, 0.0] for name in names}
        for _ in range(args.rounds):
            for name in names:
                token, chunk, results = claimed()
                work = parts(token, chunk, results)[name]
                server_cpu = server_seconds(server)
                cpu = time.process_time()
                transaction(engine, work)
                spent[name][0] += time.process_time() - cpu
                spent[name][1] += server_seconds(server) - server_cpu  # (its resolution: 10 ms; summed over the rounds)
        if args.profile:
            import cProfile
            import pstats

            profile = cProfile.Profile()
            for _ in range(args.rounds):
                work = parts(*claimed())[args.profile]
                profile.enable()
                transaction(engine, work)
                profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(25)
        print(f"per write-back of {args.batch} results, {args.rounds} rounds (µs of CPU: this process / MariaDB):")
        for name, (mine, theirs) in spent.items():
            print(f"  {name:>28}: {1e6 * mine / args.rounds:7.0f} / {1e6 * theirs / args.rounds:7.0f}")
        gate.close()


if __name__ == "__main__":
    main()
