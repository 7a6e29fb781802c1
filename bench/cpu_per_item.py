"""The workers' Python per item, step by step, without a database: what P4's CPU per item
(``db_ceiling.py``'s ``CPU:`` lines) is made of on the gate's side, for a chunk of the P4
prompt (a plain template over one column, two labels, an instant model's answers).

    python bench/cpu_per_item.py [--chunk 256] [--batch 16] [--repeat 200] [--profile STEP]

Each step runs on a chunk's items as the executor does (a render thread's preparation, a
call thread's result, a write-back's statements as text, built but not sent) and prints
its process CPU per item, the minimum over ``--repeat`` rounds (so another process's load
moves it less than it moves the rates). The statements are the PyMySQL text forms of
``gate/store`` (``textsql``), filled for MariaDB with the connection's quoting; what the
server spends on them, and the round trips, are ``db_ceiling.py``'s. ``--batch``: the
results a write-back carries (with the at-least-once bound and an instant model, ~15).
``--profile STEP`` prints cProfile's top functions of that step.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def setup(chunk: int):
    from sqlalchemy.dialects.mysql import pymysql as mysql_pymysql
    from support.helpers import rules_spec

    from gate.calls.llm import CallResult
    from gate.calls.providers import endpoint_for
    from gate.records import Answer, ClaimedItem

    spec = rules_spec("p1")
    rows = {p: json.dumps({"text": f"alpha message {p} " + "x" * 40}) for p in range(chunk)}
    items = [ClaimedItem(1, p, f"i{p}", None, "yes", 1) for p in range(chunk)]
    out = CallResult(decision="yes", valid=True, raw_output="yes", latency_ms=0, prompt_tokens=1, completion_tokens=1)
    conn = SimpleNamespace(dialect=mysql_pymysql.dialect())
    endpoint = endpoint_for(None)
    return SimpleNamespace(
        spec=spec, rows=rows, items=items, out=out, conn=conn, endpoint=endpoint, Answer=Answer, ClaimedItem=ClaimedItem
    )


def steps(env, batch: int):
    from gate.calls.llm import render_messages_many
    from gate.prompt.request_keys import trial_keys
    from gate.prompt.sandbox import RenderBudget, RenderPool
    from gate.store import items as store_items
    from gate.store.answers import _SAVE_ANSWERS, ANSWER_COLUMNS
    from gate.store.textsql import _LITERALS, rows_template, update_template
    from workers.execute.results import called_result, new_answers, reused_item

    quote = _LITERALS[False]
    renderer = RenderPool(RenderBudget())
    spec, base_url = env.spec, env.endpoint.base_url
    state: dict = {}

    def inputs():
        decoded = {position: json.loads(text) for position, text in env.rows.items()}
        C = env.ClaimedItem
        state["items"] = [
            C(i.run_id, i.position, i.item_id, decoded.get(i.position), i.expected_decision, i.attempt)
            for i in env.items
        ]

    def render():
        state["messages"] = render_messages_many(spec, [i.input for i in state["items"]], renderer)

    def keys():
        state["keys"] = [trial_keys(spec, m, base_url) for m in state["messages"]]

    def called():
        state["results"] = [
            called_result(i, env.out, k[0], spec.decision, 1) for i, k in zip(state["items"], state["keys"])
        ]

    def reused():
        A = env.Answer
        [
            reused_item(i, spec.rule, k, {k[0]: A(k[0], "yes", "yes", 0, 1, 1, 7, 9)}, spec.decision)
            for i, k in zip(state["items"], state["keys"])
        ]

    def write_back():
        results = state["results"]
        for start in range(0, len(results), batch):
            part = results[start : start + batch]
            shape = store_items._results_shape(part)
            values = store_items._result_values(part, shape)
            params = {"chunk_run": 1, "positions": [r.position for r in part], "token": "t" * 32}
            sql = update_template(shape, lambda shape=shape: store_items._results_statement(shape), env.conn, quote)
            sql(params, values, len(part))

    def answers():
        results = state["results"]
        for start in range(0, len(results), batch):
            kept = sorted(new_answers(results[start : start + batch], 7, 9), key=lambda a: a.request_key)
            columns = {column: [getattr(a, column) for a in kept] for column in ANSWER_COLUMNS}
            rows_template("save_answers", lambda: _SAVE_ANSWERS, env.conn, quote).statements(columns)

    def tally():
        from workers.execute.results import tally_outcomes

        results = state["results"]
        for start in range(0, len(results), batch):
            tally_outcomes(results[start : start + batch], state["items"])

    return {
        "inputs": inputs,
        "render": render,
        "keys": keys,
        "called": called,
        "reused": reused,
        "write_back": write_back,
        "answers": answers,
        "tally": tally,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--profile", default="")
    args = ap.parse_args()
    env = setup(args.chunk)
    named = steps(env, args.batch)
    total = 0.0
    for name, step in named.items():
        try:
            step()  # warm: templates compiled, caches filled
        except ImportError:
            print(f"{name:>11}: (not in this checkout)")
            continue
        best = float("inf")
        for _ in range(args.repeat):
            started = time.process_time()
            step()
            best = min(best, time.process_time() - started)
        total += best
        print(f"{name:>11}: {1e6 * best / args.chunk:6.2f} µs/item")
        if name == args.profile:
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(args.repeat):
                step()
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(15)
    print(
        f"{'all':>11}: {1e6 * total / args.chunk:6.2f} µs/item (one chunk of {args.chunk}, write-backs of {args.batch})"
    )


if __name__ == "__main__":
    main()
