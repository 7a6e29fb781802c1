"""P9 (issue 25): how long a `promptgate` command takes from exec to exit, as a user runs it.

`promptgate --version`, `promptgate --help` and `promptgate status ID` through a real
`promptgate serve` (a subprocess on a free port, on a temporary SQLite database, with a
read token in PROMPTGATE_TOKEN and the URL in PROMPTGATE_URL; ID a real update, still
open: its report is fetched and printed, exit 3), each run N times as a process by the
console script, round-robin with `python -c pass` (the interpreter's own start, measured
in the same rounds: the ratio to it does not depend on how loaded the machine is). The
same `status` on the database (--database-url, SQLAlchemy and the service loaded) is
printed for comparison, outside the verdict.

Target: the median of each of the three ≤ 0.25 s. The LAST line is the slowest median's
RESULT.

    python bench/cli_start.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from common import ROOT, free_port, result, rules_spec, write_dataset

TARGET = 0.25
PROMPTGATE = str(Path(sys.executable).with_name("promptgate"))


def serve(db_url: str, log: Path) -> subprocess.Popen:
    """`promptgate serve` on a free port, up (its /healthz answers): the process."""
    port = free_port()
    env = {**os.environ, "PROMPTGATE_DATABASE_URL": db_url, "PYTHONPATH": str(ROOT)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [PROMPTGATE, "serve", "--port", str(port), "--log-level", "warning"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    proc.url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"promptgate serve exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(proc.url + "/healthz", timeout=1) as answer:
                if answer.status == 200:
                    return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("promptgate serve did not answer in 60 s")


def prepared_gate(folder: Path) -> tuple[str, str, int]:
    """A migrated SQLite gate with a dataset gating prompt p1 and one open update of it:
    (database URL, a read token, the update's id)."""
    from gate.service import Gate

    url = f"sqlite:///{folder / 'gate.db'}"
    gate = Gate.connect(url, upgrade=True)
    try:
        gate.register_dataset("d", str(write_dataset(folder / "d.csv", 200)))
        gate.map_dataset("p1", "d", "0.99")
        update_id = gate.submit(rules_spec("p1"))
        return url, gate.create_token("bench-cli-start", "read"), update_id
    finally:
        gate.close()


def timed(argv: list[str], env: dict, expect: int) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True)
    took = time.perf_counter() - start
    if proc.returncode != expect:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}, not {expect}: {proc.stderr[-800:]}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db_url, token, update_id = prepared_gate(Path(tmp))
        server = serve(db_url, Path(tmp) / "serve.log")
        try:
            base = {k: v for k, v in os.environ.items() if not k.startswith("PROMPTGATE_")}
            remote = {**base, "PROMPTGATE_URL": server.url, "PROMPTGATE_TOKEN": token}
            cases = {
                "python -c pass": ([sys.executable, "-c", "pass"], base, 0),
                "promptgate --version": ([PROMPTGATE, "--version"], base, 0),
                "promptgate --help": ([PROMPTGATE, "--help"], base, 0),
                f"promptgate status {update_id} (service)": ([PROMPTGATE, "status", str(update_id)], remote, 3),
                f"promptgate status {update_id} (database)": (
                    [PROMPTGATE, "--database-url", db_url, "status", str(update_id)],
                    base,
                    3,
                ),
            }
            times: dict[str, list[float]] = {name: [] for name in cases}
            for argv, env, expect in cases.values():  # once each, unmeasured: files in the page cache
                timed(argv, env, expect)
            for _ in range(args.runs):
                for name, (argv, env, expect) in cases.items():
                    times[name].append(timed(argv, env, expect))
        finally:
            server.terminate()
            server.wait(30)
    return report(times, args.runs)


def report(times: dict[str, list[float]], runs: int) -> int:
    interpreter = statistics.median(times["python -c pass"])
    print(f"{runs} runs each, round-robin; load average now {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'command':44} {'median':>8} {'min':>7} {'max':>7} {'x python -c pass':>17}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:44} {median:8.3f} {min(values):7.3f} {max(values):7.3f} {median / interpreter:17.2f}")
    judged = [name for name in times if name.startswith("promptgate") and not name.endswith("(database)")]
    slowest = max(judged, key=lambda name: statistics.median(times[name]))
    print(f"slowest judged: {slowest}")
    ok = result(
        "cli_start",
        statistics.median(times[slowest]),
        "s median (slowest of --version, --help, status through the service)",
        TARGET,
        higher_is_better=False,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
