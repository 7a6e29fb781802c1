"""A behaviour fingerprint of prompt-gate: one deterministic text, for a refactor said to change nothing.

What it prints, each in its own ``==== section``:

1. every decision kind's report, from fixed inputs (prompts-example/ and a few small files
   written here): a label run (ticket-urgency, first_word), a fields run (support-extract), a
   tool-call run (support-router), a judged run (support-reply, ``pass:``) and a compared run
   (a reply prompt with ``compare: live`` against its live version), each as ``status`` prints
   it in text, Markdown and JSON, and as the status page's HTML (``/updates/ID``);
2. every ``--json`` output of the CLI on those updates (submit, wait, status, live, history,
   dataset add/list/versions/preview/refresh/diff, sync, prices, drift, prune --dry-run, token
   create/list, workers, rollback) and ``report ID`` (Markdown);
3. the stored ``prompt_run.pinned`` and ``prompt_run.metrics`` JSON of every run (and each
   update's status and reason), read from the SQLite database directly;
4. the HTTP service's OpenAPI document (``GET /openapi.json`` from ``promptgate serve``);
5. the DDL of every table on SQLite (``sqlite_master``) and on MariaDB (``SHOW CREATE TABLE``
   on a throwaway server started with tests/support/mariadb_server.py, migrated by
   ``promptgate db upgrade``); when MariaDB cannot be started the section says so.

Everything goes through the ``promptgate`` command as subprocesses (``--database-url`` on a
SQLite file in a temp folder), the local model server (``promptgate mock-llm``, fixed seed)
and real workers (``promptgate worker``), so the script does not import the packages a
refactor may rename. Updates run one after another, each with ``--full`` (no early stop,
whose cut-off depends on timing), so ids and answers are the same on every run. What
legitimately varies (times, durations, latencies, ports, temp paths, tokens, host names,
process ids, rates per second) is replaced by placeholders: by key in JSON (``SCRUB_KEYS``)
and by small named regexes in text (``SCRUB_TEXT``).

Use: run it on two commits with each commit's own install and diff the outputs; two runs of
the same commit give byte-identical output::

    cp bench/fingerprint.py /tmp/fingerprint.py     # one copy of the script for both commits
    git checkout BASE && .venv/bin/python /tmp/fingerprint.py --repo . --out /tmp/base.txt
    git checkout NEW && .venv/bin/python /tmp/fingerprint.py --repo . --out /tmp/new.txt
    diff /tmp/base.txt /tmp/new.txt && echo "no behaviour change seen"

(or two worktrees, each with its own ``make install``, and ``--repo`` pointing at each). The
subprocesses run the checkout's code (``PYTHONPATH`` is set to it). It takes a minute on a quiet
machine, a few under load; ``--keep`` leaves the temp folder (database, logs) for a look.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout whose behaviour is printed (--repo)
EXAMPLES = ROOT / "prompts-example"
SEED = 7
SHA = "f1e2d3c4b5a69788796a5b4c3d2e1f0011223344"  # the commit the APPLIED label run says it comes from

# --- normalisation -------------------------------------------------------------------------

# JSON keys whose values vary from run to run (a non-null value becomes "<key>"; null stays
# null, so whether a value is there is still seen). Under such a key (e.g. "latency_ms":
# {"p50", "p95", "max", "timed"}) every value is scrubbed except the counts in KEEP_KEYS.
SCRUB_KEYS = re.compile(
    r"(^|_)(at|time|timestamp|seconds|secs|ms|latency|duration|elapsed|eta|pid|host|hostname|"
    r"token|token_hash|heartbeat|lease_token|lease_until|per_second|throughput|process_id)$"
    r"|latency|elapsed|duration",
    re.I,
)
# Keys whose value is kept although SCRUB_KEYS matches them or their parent's key: settings and
# counts, not timings.
KEEP_KEYS = {"max_latency_p95_ms", "timed", "n", "count", "items", "calls"}

TIME = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2}| ?UTC)?"
SCRUB_TEXT: list[tuple[str, re.Pattern, str]] = [
    ("timestamp", re.compile(TIME), "<TIME>"),
    ("port", re.compile(r"\b(127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1\]):\d+"), r"\1:<PORT>"),
    ("token", re.compile(r"\bpg[a-z]*_[A-Za-z0-9_\-]{16,}"), "<TOKEN>"),
    ("latency", re.compile(r"\b\d+(\.\d+)?\s?(ms|µs|us)\b"), "<MS>"),
    ("seconds", re.compile(r"(?<![\w.])\d+(\.\d+)?\s?(s|sec|seconds|min|m|h)\b(?!\w)"), "<DURATION>"),
    ("per-second", re.compile(r"\b\d+(\.\d+)?\s?(/s|per second|items/s|calls/s)"), "<RATE>"),
    ("pid", re.compile(r"\b(pid|process)[ =:]+\d+", re.I), r"\1 <PID>"),
]


def scrub_json(value, key: str = "", scrubbed: bool = False):
    """``scrubbed``: under a key SCRUB_KEYS matched (a latency's figures)."""
    here = key not in KEEP_KEYS and (scrubbed or bool(key and SCRUB_KEYS.search(key)))
    if isinstance(value, dict):
        return {k: scrub_json(v, k, here) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_json(v, key, scrubbed) for v in value]
    if here and value is not None:
        return f"<{key}>"
    if isinstance(value, str):
        return scrub_text(value)
    return value


def drop_keys(value, keys: frozenset):
    """Values of ``keys`` (anywhere) replaced by "<key>"."""
    if isinstance(value, dict):
        return {k: (f"<{k}>" if k in keys else drop_keys(v, keys)) for k, v in value.items()}
    if isinstance(value, list):
        return [drop_keys(v, keys) for v in value]
    return value


# An update's figures at submit: the workers may have claimed and called some of its items
# by the time `submit --json` reads them back.
OPEN_SPEND = frozenset({"calls_made", "calls_unrecorded", "calls_reused", "calls_saved"})


class Scrubber:
    """Text placeholders for this run's own paths, ports, host and tokens, then SCRUB_TEXT."""

    literal: list[tuple[str, str]] = []

    @classmethod
    def add(cls, value: str, placeholder: str) -> None:
        if value and (value, placeholder) not in cls.literal:
            cls.literal.append((value, placeholder))
            cls.literal.sort(key=lambda pair: -len(pair[0]))

    hosts: list[tuple[re.Pattern, str]] = []

    @classmethod
    def host(cls, name: str) -> None:
        """This machine's name, as a whole word only (it may be as short as "vm")."""
        if name and name != "localhost":
            cls.hosts.append((re.compile(rf"(?<![\w.-]){re.escape(name)}-\d+-[0-9a-f]{{8}}\b"), "<WORKER_ID>"))
            cls.hosts.append((re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w-])"), "<HOST>"))


def scrub_text(text: str) -> str:
    for value, placeholder in Scrubber.literal:
        text = text.replace(value, placeholder)
    for pattern, placeholder in Scrubber.hosts:
        text = pattern.sub(placeholder, text)
    for _, pattern, placeholder in SCRUB_TEXT:
        text = pattern.sub(placeholder, text)
    return text


def scrub_output(text: str, keys: frozenset = frozenset()) -> str:
    """A command's stdout: JSON scrubbed by key (its key order kept) and by ``keys`` (this
    command's own), anything else as text."""
    stripped = text.strip()
    if stripped[:1] in "[{":
        try:
            value = scrub_json(json.loads(stripped))
            if keys:
                value = drop_keys(value, keys)
            return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
        except ValueError:
            pass
    return scrub_text(text)


# --- the processes -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Run:
    """The temp folder, the database, the model server, the workers, the service."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.db = tmp / "gate.db"
        self.url = f"sqlite:///{self.db}"
        self.llm_port = free_port()
        self.llm_url = f"http://127.0.0.1:{self.llm_port}/v1"
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "PROMPTGATE_DATABASE_URL": self.url,
            "OPENAI_BASE_URL": self.llm_url,
            "OPENAI_API_KEY": "fingerprint-key",
            "PROMPTGATE_POLL_INTERVAL": "0.05",
            "PROMPTGATE_POLL_MAX_INTERVAL": "0.2",
            "PROMPTGATE_ACTOR": "fingerprint",
            "TZ": "UTC",
            "COLUMNS": "120",
            "NO_COLOR": "1",
        }
        for k in ("PROMPTGATE_URL", "PROMPTGATE_TOKEN"):
            self.env.pop(k, None)
        self.procs: list[subprocess.Popen] = []
        Scrubber.add(str(tmp), "<TMP>")
        Scrubber.add(str(tmp).replace("_", "\\_"), "<TMP>")  # as Markdown escapes it
        Scrubber.add(str(ROOT), "<ROOT>")
        Scrubber.add(str(ROOT).replace("_", "\\_"), "<ROOT>")
        Scrubber.host(socket.gethostname())

    def spawn(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.tmp / f"{name}.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "gate.cli", *args],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.tmp,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def cli(self, *args: str, ok=(0,), cwd: Path | None = None) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [sys.executable, "-m", "gate.cli", "--database-url", self.url, *map(str, args)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=cwd or self.tmp,
        )
        if ok is not None and done.returncode not in ok:
            raise SystemExit(f"promptgate {' '.join(map(str, args))} exited {done.returncode}:\n{done.stderr}")
        return done

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_http(url: str, seconds: float = 30, headers: dict | None = None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=2):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{url} did not answer in {seconds} s")


def wait_port(port: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on port {port} after {seconds} s")


def http_get(url: str, token: str | None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


# --- the output ----------------------------------------------------------------------------


class Out:
    def __init__(self):
        self.parts: list[str] = []
        self.sections: list[tuple[str, int]] = []

    def section(self, title: str) -> None:
        self.sections.append((title, len(self.parts)))
        self.parts.append(f"\n==== {title}\n")

    def block(self, title: str, text: str) -> None:
        self.parts.append(f"\n---- {title}\n{text if text.endswith(chr(10)) or not text else text + chr(10)}")

    def command(
        self, run: Run, *args: str, ok=(0,), stderr: bool = True, keys: frozenset = frozenset()
    ) -> subprocess.CompletedProcess:
        done = run.cli(*args, ok=ok)
        shown = " ".join(scrub_text(str(a)) for a in args)
        text = f"exit {done.returncode}\n" + scrub_output(done.stdout, keys)
        if stderr and done.stderr.strip():
            text += "[stderr]\n" + scrub_text(done.stderr)
        self.block(f"$ promptgate {shown}", text)
        return done

    def text(self) -> str:
        return "".join(self.parts).lstrip("\n")


# --- the inputs ----------------------------------------------------------------------------

PAIR_RULES = (
    "Which reply is better?\n- judge pass good: refund*, reset your password, tracking number\n"
    "- judge otherwise: tie\n- judge position bias: 30%"
)
PAIR_TEMPLATE = "Ticket: {{ item.ticket }}\n<answer_a>{{ answer_a }}</answer_a>\n<answer_b>{{ answer_b }}</answer_b>"
GOOD_REPLIES = (
    "Draft a reply to the ticket.\n"
    "- reply when refund*, charged: We are sorry: a refund has been issued to your card.\n"
    "- reply when password: You can reset your password from the sign-in page.\n"
    "- reply when parcel, delivery: Here is your tracking number: it arrives tomorrow.\n"
    "- reply otherwise: Thanks for writing; we will look into it."
)
WEAK_REPLIES = (
    "Draft a reply to the ticket.\n"
    "- reply when password: You can reset your password from the sign-in page.\n"
    "- reply otherwise: Thanks for writing; we will look into it."
)
TOPICS = ("I was charged twice for order {i}", "I forgot my password, account {i}", "Where is my parcel {i}?")


def write_compare_inputs(folder: Path) -> dict[str, Path]:
    """A comparing judge (as tests/support/judging.py: pair_judge_spec, write_pairs,
    write_tickets), its labelled pairs, tickets, and a reply prompt in two versions."""
    folder.mkdir()
    good, plain = "A refund has been issued to your card.", "Thanks for writing; we will look into it."
    with (folder / "pairs.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "ticket", "answer_a", "answer_b"])
        for i in range(30):
            a, b, label = [(good, plain, "A"), (plain, good, "B"), (plain, plain, "tie")][i % 3]
            w.writerow([f"p{i}", label, TOPICS[i % 3].format(i=i), a, b])
    with (folder / "tickets.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "ticket"])
        for i in range(30):
            w.writerow([f"t{i}", "good", TOPICS[i % 3].format(i=i)])

    def prompt(name: str, body: dict) -> Path:
        path = folder / f"{name}.json"  # JSON is YAML: no yaml library needed here
        path.write_text(json.dumps(body, indent=2))
        return path

    pair_judge = prompt(
        "pair-judge",
        {
            "name": "pair-judge",
            "kind": "judge",
            "model": "mock-1",
            "labels": ["A", "B", "tie"],
            "messages": [{"role": "system", "content": PAIR_RULES}, {"role": "user", "content": PAIR_TEMPLATE}],
        },
    )

    def reply(rules: str) -> dict:
        return {
            "name": "reply",
            "model": "mock-1",
            "messages": [{"role": "system", "content": rules}, {"role": "user", "content": "{{ item.ticket }}"}],
            "decision": {"type": "judge", "judge": "pair-judge", "compare": "live"},
        }

    return {
        "pairs": folder / "pairs.csv",
        "tickets": folder / "tickets.csv",
        "pair-judge": pair_judge,
        "reply-v1": prompt("reply-v1", reply(WEAK_REPLIES)),
        "reply-v2": prompt("reply-v2", reply(GOOD_REPLIES)),
    }


# --- the steps -----------------------------------------------------------------------------


def evaluate(out: Out, run: Run, path: Path, mode: str, label: str, updates: list, *extra: str) -> int:
    """Submit one prompt file, wait for its update to end, record both outputs."""
    done = out.command(run, "submit", str(path), "--mode", mode, "--full", *extra, "--json", keys=OPEN_SPEND)
    update_id = json.loads(done.stdout)["id"]
    out.command(run, "wait", str(update_id), "--json", "--no-progress", "--timeout", "240", ok=(0, 1, 2))
    updates.append((update_id, label))
    return update_id


def reports(out: Out, run: Run, updates: list, base: str, token: str) -> None:
    for update_id, label in updates:
        out.section(f"reports: update {update_id} ({label})")
        out.command(run, "status", str(update_id), ok=(0, 1, 2))
        out.command(run, "status", str(update_id), "--format", "markdown", ok=(0, 1, 2))
        out.command(run, "status", str(update_id), "--json", ok=(0, 1, 2))
        out.command(run, "report", str(update_id))
        status, html = http_get(f"{base}/updates/{update_id}", token)
        out.block(f"GET /updates/{update_id} (the status page)", f"HTTP {status}\n{scrub_text(html)}")


def stored_runs(out: Out, run: Run) -> None:
    out.section("stored: prompt_update and prompt_run rows (status, reason, pinned, metrics)")
    conn = sqlite3.connect(run.db)
    conn.row_factory = sqlite3.Row
    try:

        def loaded(value):
            return scrub_json(json.loads(value)) if value else None

        for u in conn.execute("SELECT * FROM prompt_update ORDER BY id"):
            row = dict(u)
            shown = {
                k: row.get(k) for k in ("id", "prompt_name", "mode", "status", "reason", "base_version", "full_run")
            }
            shown.update({k: loaded(row.get(k)) for k in ("stopped", "limits", "rollout", "source")})
            out.block(f"prompt_update {u['id']}", json.dumps(shown, indent=2, sort_keys=True, ensure_ascii=False))
        for r in conn.execute(
            "SELECT r.*, d.name AS dataset_name FROM prompt_run r JOIN dataset d ON d.id = r.dataset_id ORDER BY r.id"
        ):
            row = dict(r)
            head = {
                k: row.get(k)
                for k in ("id", "update_id", "dataset_name", "role", "status", "reason", "stopped", "row_count")
            }
            text = json.dumps(head, sort_keys=True, ensure_ascii=False)
            text += "\npinned " + json.dumps(loaded(row["pinned"]), indent=2, sort_keys=True, ensure_ascii=False)
            text += "\nmetrics " + json.dumps(loaded(row["metrics"]), indent=2, sort_keys=True, ensure_ascii=False)
            out.block(f"prompt_run {r['id']}", scrub_text(text))
    finally:
        conn.close()


def sqlite_ddl(run: Run) -> str:
    conn = sqlite3.connect(run.db)
    try:
        rows = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' "
            "ORDER BY tbl_name, type DESC, name"
        ).fetchall()
    finally:
        conn.close()
    return "".join(f"-- {kind} {name} on {table}\n{sql};\n\n" for kind, name, table, sql in rows)


def mariadb_ddl(result: dict, env: dict) -> None:
    """SHOW CREATE TABLE of every table of a database migrated by `promptgate db upgrade` on a
    throwaway MariaDB (tests/support/mariadb_server.py); ``result['text']`` the DDL or why not."""
    server = None
    try:
        sys.path.insert(0, str(ROOT / "tests"))
        import pymysql
        from support.mariadb_server import LocalMariaDB

        server = LocalMariaDB(durable=False, buffer_pool="64M")
        server.install()
        server.start()
        with pymysql.connect(host="127.0.0.1", port=server.port, user="root") as conn, conn.cursor() as cur:
            cur.execute("CREATE DATABASE fingerprint CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        url = server.url("fingerprint")
        done = subprocess.run(
            [sys.executable, "-m", "gate.cli", "--database-url", url, "db", "upgrade"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
        )
        text = f"$ promptgate db upgrade: exit {done.returncode}\n{scrub_text(done.stdout)}"
        with pymysql.connect(host="127.0.0.1", port=server.port, user="root", database="fingerprint") as conn:
            with conn.cursor() as cur:
                cur.execute("SELECT VERSION()")
                version = cur.fetchone()[0]
                cur.execute("SHOW FULL TABLES")
                tables = sorted(cur.fetchall())
                for name, kind in tables:
                    cur.execute(f"SHOW CREATE TABLE `{name}`")
                    ddl = cur.fetchone()[1]
                    ddl = re.sub(r" AUTO_INCREMENT=\d+", " AUTO_INCREMENT=<N>", ddl)
                    text += f"-- {kind} {name}\n{ddl};\n\n"
        result["text"] = text
        result["server"] = re.sub(r"-log$", "", version)
    except Exception as exc:  # noqa: BLE001 - any failure to start MariaDB is reported, not fatal
        result["text"] = f"MariaDB DDL not taken: {type(exc).__name__}: {exc}\n"
    finally:
        if server is not None:
            server.cleanup()


def walk(out: Out, run: Run, inputs: dict[str, Path]) -> list:
    updates: list[tuple[int, str]] = []
    out.section("setup: the gate config of prompts-example/ and the live versions")
    out.command(run, "db", "upgrade")
    out.command(run, "sync", str(EXAMPLES / "gate.yaml"), "--json")
    for name in ("reply-judge", "ticket-urgency", "support-extract", "support-reply", "support-router"):
        evaluate(out, run, EXAMPLES / "prompts" / f"{name}.yaml", "apply", f"{name}: the live version", updates)

    out.section("candidates: label, fields, tool-call and judged runs")
    c = EXAMPLES / "candidates"
    evaluate(out, run, c / "ticket-urgency-v2-weak.yaml", "apply", "label run, first_word: REJECTED", updates)
    evaluate(out, run, c / "ticket-urgency-v2.yaml", "apply", "label run, first_word: APPLIED", updates, "--sha", SHA)
    out.command(run, "wait", "--sha", SHA, "--json", "--timeout", "60")
    out.command(run, "report", "--sha", SHA)
    evaluate(out, run, c / "support-extract-v2.yaml", "apply", "fields run", updates)
    evaluate(out, run, c / "support-router-v2.yaml", "apply", "tool-call run", updates)
    evaluate(out, run, c / "support-reply-v2.yaml", "apply", "judged run, pass: [good]", updates)

    out.section("compared run: a reply prompt judged against its live version (compare: live)")
    out.command(run, "dataset", "add", "pairs", "--source", str(inputs["pairs"]), "--json")
    out.command(run, "dataset", "map", "pair-judge", "pairs", "--min-accuracy", "0.5")
    evaluate(out, run, inputs["pair-judge"], "apply", "the comparing judge pair-judge", updates)
    out.command(run, "dataset", "add", "tickets", "--source", str(inputs["tickets"]), "--json")
    bars = ("--min-accuracy", "0.5", "--max-loss-rate", "0.05", "--sentinels", "0")
    out.command(run, "dataset", "map", "reply", "tickets", *bars)
    evaluate(out, run, inputs["reply-v1"], "apply", "compared run, no live version yet", updates)
    evaluate(out, run, inputs["reply-v2"], "check", "compared run against live", updates)
    return updates


def other_json(out: Out, run: Run, inputs: dict[str, Path]) -> None:
    out.section("other --json commands")
    out.command(run, "dataset", "list", "--json")
    for name in ("urgency-regression", "support-emails", "support-conversations", "support-tickets", "tickets"):
        out.command(run, "dataset", "versions", name, "--json")
        out.command(run, "dataset", "preview", name, "--rows", "3", "--json")
    for name in ("ticket-urgency", "support-extract", "support-reply", "support-router", "reply", "pair-judge"):
        out.command(run, "live", name, "--json", ok=(0, 2))  # 2: no live version (a first version refused)
        out.command(run, "history", name, "--json")
    out.command(run, "prices", "--json")
    out.command(run, "sync", str(EXAMPLES / "gate.yaml"), "--dry-run", "--json")
    out.command(run, "drift", *sorted(str(p) for p in (EXAMPLES / "prompts").glob("*.yaml")), "--json", ok=(0, 1))
    out.command(run, "workers", "--json")
    out.command(run, "token", "list", "--json")
    out.command(run, "prune", "--older-than", "1d", "--dry-run", "--json")
    with inputs["tickets"].open("a", newline="") as fh:
        csv.writer(fh).writerows([["t30", "good", "Where is my parcel 30?"], ["t31", "bad", "Hello 31"]])
    out.command(run, "dataset", "refresh", "tickets", "--json")
    out.command(run, "dataset", "diff", "tickets", "v1", "v2", "--json")
    out.command(run, "rollback", "ticket-urgency", "--reason", "fingerprint", "--actor", "fingerprint", "--json")
    out.command(run, "history", "ticket-urgency", "--json")


def summary(out: Out) -> str:
    """Bytes per kind of section (the title up to its colon), in order."""
    sizes: dict[str, list[int]] = {}
    bounds = [start for _, start in out.sections] + [len(out.parts)]
    for (title, start), end in zip(out.sections, bounds[1:]):
        kind = sizes.setdefault(title.split(":")[0], [0, 0])
        kind[0] += 1
        kind[1] += sum(len(part.encode()) for part in out.parts[start:end])
    text = out.text()
    parts = ", ".join(f"{kind} ×{n} {size:,} B" if n > 1 else f"{kind} {size:,} B" for kind, (n, size) in sizes.items())
    return f"{len(text.encode()):,} bytes, {text.count(chr(10)):,} lines; {parts}"


def through_the_service(out: Out, run: Run, updates: list, inputs: dict[str, Path]) -> None:
    """`promptgate serve` with a read token: each update's reports and page, the OpenAPI
    document, then the other --json commands and the stored rows."""
    token = json.loads(run.cli("token", "create", "fingerprint-read", "--scope", "read", "--json").stdout)["token"]
    Scrubber.add(token, "<TOKEN>")
    out.section("token create --json")
    out.command(run, "token", "create", "fingerprint-admin", "--scope", "admin", "--json")
    port = free_port()
    run.spawn("serve", "--database-url", run.url, "serve", "--port", str(port), "--log-level", "warning")
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/healthz")
    reports(out, run, updates, base, token)
    out.section("openapi: GET /openapi.json")
    status, body = http_get(base + "/openapi.json", token)
    try:
        body = json.dumps(json.loads(body), indent=2, sort_keys=True, ensure_ascii=False)
    except ValueError:
        pass
    out.block("openapi.json", f"HTTP {status}\n{scrub_text(body)}")
    other_json(out, run, inputs)
    stored_runs(out, run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="Write here (default: stdout).")
    parser.add_argument("--keep", action="store_true", help="Keep the temp folder (database, logs).")
    parser.add_argument(
        "--repo", type=Path, default=None, help="The checkout to run (default: the one this script is in)."
    )
    args = parser.parse_args()
    global ROOT, EXAMPLES
    if args.repo is not None:
        ROOT, EXAMPLES = args.repo.resolve(), args.repo.resolve() / "prompts-example"
    if not (ROOT / "gate" / "cli").is_dir() or not (EXAMPLES / "gate.yaml").is_file():
        raise SystemExit(f"{ROOT} is not a prompt-gate checkout: give --repo")
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="promptgate-fingerprint-"))
    run, out, maria = Run(tmp), Out(), {}
    maria_thread = threading.Thread(target=mariadb_ddl, args=(maria, run.env), daemon=True)
    maria_thread.start()
    try:
        inputs = write_compare_inputs(tmp / "inputs")
        run.spawn("mock-llm", "mock-llm", "--port", str(run.llm_port), "--seed", str(SEED))
        wait_port(run.llm_port)
        run.cli("db", "upgrade")
        run.spawn("worker", "--database-url", run.url, "worker", "--role", "all", "--concurrency", "8")
        updates = walk(out, run, inputs)
        through_the_service(out, run, updates, inputs)
    finally:
        run.stop()
        maria_thread.join(600)  # its server stopped and removed, also when this run failed
    out.section("ddl: SQLite (sqlite_master of the migrated database)")
    out.block("sqlite", sqlite_ddl(run))
    out.section("ddl: MariaDB (SHOW CREATE TABLE of a database migrated by promptgate db upgrade)")
    out.block(f"mariadb {maria.get('server', '(none)')}", maria.get("text", "MariaDB DDL not taken: timed out\n"))
    text = out.text()
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    print(f"fingerprint: {summary(out)} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    if args.keep:
        print(f"kept {tmp}", file=sys.stderr)
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
