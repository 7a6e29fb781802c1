"""P9 (issue 25): how long a `promptgate` command takes from exec to exit, as a user runs it.

`promptgate --version`, `promptgate --help` and `promptgate status ID` through a real
`promptgate serve` (a subprocess on a free port, on a temporary SQLite database, with a
read token in PROMPTGATE_TOKEN and the URL in PROMPTGATE_URL; ID a real update, still
open: its report is fetched and printed, exit 3), and on the database (--database-url:
SQLAlchemy and the store loaded) `status ID`, `submit FILE` (a check of the prompt: one
more update, the one before superseded) and `wait ID2` (a cancelled update: one read and
its report, exit 2), each run N times as a process by the console script, round-robin
with `python -c pass` (the interpreter's own start) and `python -c "import click,
sqlalchemy"` (what every command on the database imports before any of the gate: its
floor), measured in the same rounds, so the ratios do not depend on how loaded the
machine is.

Target (issues 25 and 40): the median of each command ≤ 0.25 s. The LAST line is the
slowest median's RESULT.

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
FLOOR = "python -c 'import click, sqlalchemy'"
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


def prepared_gate(folder: Path) -> tuple[str, str, int, int]:
    """A migrated SQLite gate with a dataset gating prompt p1, one open apply of it and a
    cancelled one, and the prompt's file (folder/p1.yaml): (database URL, a read token, the
    open update's id, the cancelled one's)."""
    import yaml

    from gate.domain import Gate

    url = f"sqlite:///{folder / 'gate.db'}"
    gate = Gate.connect(url, upgrade=True)
    try:
        gate.register_dataset("d", str(write_dataset(folder / "d.csv", 200)))
        gate.map_dataset("p1", "d", "0.99")
        spec = rules_spec("p1")
        (folder / "p1.yaml").write_text(yaml.safe_dump(spec.to_config()))
        cancelled = gate.submit(spec, mode="apply")
        gate.cancel(cancelled)
        update_id = gate.submit(spec, mode="apply")
        return url, gate.create_token("bench-cli-start", "read"), update_id, cancelled
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
        db_url, token, update_id, cancelled = prepared_gate(Path(tmp))
        server = serve(db_url, Path(tmp) / "serve.log")
        try:
            base = {k: v for k, v in os.environ.items() if not k.startswith("PROMPTGATE_")}
            remote = {**base, "PROMPTGATE_URL": server.url, "PROMPTGATE_TOKEN": token}
            on_db = [PROMPTGATE, "--database-url", db_url]
            cases = {
                "python -c pass": ([sys.executable, "-c", "pass"], base, 0),
                FLOOR: ([sys.executable, "-c", "import click, sqlalchemy"], base, 0),
                "promptgate --version": ([PROMPTGATE, "--version"], base, 0),
                "promptgate --help": ([PROMPTGATE, "--help"], base, 0),
                f"promptgate status {update_id} (service)": ([PROMPTGATE, "status", str(update_id)], remote, 3),
                f"promptgate status {update_id} (database)": ([*on_db, "status", str(update_id)], base, 3),
                f"promptgate wait {cancelled} (database)": ([*on_db, "wait", str(cancelled)], base, 2),
                "promptgate submit p1.yaml (database)": ([*on_db, "submit", str(Path(tmp) / "p1.yaml")], base, 0),
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
    floor = statistics.median(times[FLOOR])
    for name in [name for name in times if name.endswith("(database)")]:
        beyond = statistics.median(times[name]) - floor
        print(f"{name}: {beyond:.3f} s beyond the floor ({FLOOR})")
    judged = [name for name in times if name.startswith("promptgate")]
    slowest = max(judged, key=lambda name: statistics.median(times[name]))
    print(f"slowest judged: {slowest}")
    ok = result(
        "cli_start",
        statistics.median(times[slowest]),
        "s median (slowest of --version, --help, status through the service, status/wait/submit on the database)",
        TARGET,
        higher_is_better=False,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
