"""The real `promptgate` CLI as subprocesses, on MariaDB and SQLite: the whole staged →
APPLIED / REJECTED path with a worker process, exit codes, user errors, concurrent
`db upgrade`, and the wheel installed into a fresh venv."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from support.cli import run_cli
from support.helpers import RULES, write_rule_rows
from support.workers_harness import WorkerFleet, worker_env

from gate.db import migrations
from gate.mockllm import MockLLMServer


def prompt_file(path: Path, name="p1", rules=RULES) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "model": "mock-1",
                "messages": [{"role": "system", "content": rules}, {"role": "user", "content": "{{ item.text }}"}],
            }
        )
    )
    return path


def cli(db_url, *args, **kw):
    return run_cli("--database-url", db_url, *args, **kw)


def test_submit_worker_wait_to_applied_and_rejected(db_url, tmp_path):
    assert cli(db_url, "db", "upgrade").returncode == 0
    data = write_rule_rows(tmp_path / "d.csv", 40, wrong_every=10)  # rules score 90 %
    assert cli(db_url, "dataset", "add", "d1", "--source", str(data)).returncode == 0
    assert cli(db_url, "dataset", "map", "p1", "d1", "--min-accuracy", "0.9").returncode == 0
    listed = json.loads(cli(db_url, "dataset", "list", "--json").stdout)
    assert listed[0]["gates"] == [{"prompt": "p1", "min_accuracy": "0.9", "bars": None, "declared_in": None}]

    good = prompt_file(tmp_path / "good.yaml")
    sub = cli(db_url, "submit", good, "--mode", "apply", "--json")
    assert sub.returncode == 0, sub.stderr
    uid = json.loads(sub.stdout)["id"]
    assert cli(db_url, "status", uid).returncode == 3  # staged, no worker yet
    assert cli(db_url, "wait", uid, "--timeout", "0.3").returncode == 3

    with MockLLMServer() as llm:
        fleet = WorkerFleet(worker_env(db_url, llm.base_url), tmp_path)
        fleet.start(1)
        try:
            done = cli(db_url, "wait", uid, "--timeout", "60", "--json")
            assert done.returncode == 0, done.stdout + done.stderr
            assert json.loads(done.stdout)["status"] == "APPLIED"
            live = json.loads(cli(db_url, "live", "p1", "--json").stdout)
            assert live["version"] == 1 and live["applied_update_id"] == uid

            bad = prompt_file(tmp_path / "bad.yaml", rules="- yes: beta\n- no: alpha\ndefault: yes")
            uid2 = cli(db_url, "submit", bad, "--mode", "apply").stdout.strip()
            rejected = cli(db_url, "wait", uid2, "--timeout", "60")
            assert rejected.returncode == 1, rejected.stdout
            assert "REJECTED" in rejected.stdout and "d1" in rejected.stdout
            assert json.loads(cli(db_url, "live", "p1", "--json").stdout)["version"] == 1
            workers = cli(db_url, "workers", "--json")
            assert [w["role"] for w in json.loads(workers.stdout)] == ["all"]
        finally:
            fleet.stop_all()
    uid3 = cli(db_url, "submit", good).stdout.strip()
    assert cli(db_url, "cancel", uid3).returncode == 0
    assert cli(db_url, "wait", uid3).returncode == 2
    assert cli(db_url, "cancel", uid3).returncode == 2  # terminal stays terminal


@pytest.mark.parametrize(
    "args,message",
    [
        (("dataset", "map", "p1", "nope", "--min-accuracy", "0.5"), "unknown dataset 'nope'"),
        (("dataset", "map", "p1", "d1", "--min-accuracy", "95"), "outside [0, 1]"),
        (
            ("dataset", "map", "p1", "d1", "--min-accuracy", "0.9", "--min-recall", "yes"),
            "--min-recall 'yes' is not LABEL=X, e.g. --min-recall urgent=0.9",
        ),
        (("dataset", "map", "p1", "d1", "--min-accuracy", "0.9", "--min-precision", "=0.9"), "is not LABEL=X"),
        (
            (
                "dataset",
                "map",
                "p1",
                "d1",
                "--min-accuracy",
                "0.9",
                "--min-recall",
                "yes=0.9",
                "--min-recall",
                "yes=0.8",
            ),
            "--min-recall names label 'yes' twice",
        ),
        (
            ("dataset", "map", "p1", "d1", "--min-accuracy", "0.9", "--min-recall", "yes=95"),
            "min_recall[yes] '95' is outside [0, 1]",
        ),
        (
            ("dataset", "map", "p1", "d1", "--min-accuracy", "0.9", "--max-broken", "-1"),
            "max_broken '-1' is not a whole",
        ),
        (("dataset", "map", "p1", "d1", "--min-accuracy", "0.9", "--max-latency-p95-ms", "fast"), "max_latency_p95_ms"),
        (("dataset", "map", "p1", "d1", "--min-accuracy", "0.9", "--max-cost-per-1k-items", "$2"), "US dollars"),
        (("dataset", "add", "Bad Name", "--source", "x.csv"), "not a valid name"),
        (("submit", "missing.yaml"), "missing.yaml: no such file"),
        (("submit", "{bad}"), "bad.yaml: messages[0].content: template uses config"),
        (("submit", "{unmapped}"), "has no mapped dataset"),
        (("status", "999"), "unknown update 999"),
        (("live", "p1"), "has no live version"),
        (("submit", "{good}", "--mode", "sideways"), "Invalid value for '--mode'"),
    ],
)
def test_user_errors_are_one_line_exit_2(sqlite_url, tmp_path, args, message):
    data = write_rule_rows(tmp_path / "d.csv", 4)
    assert cli(sqlite_url, "dataset", "add", "d1", "--source", str(data)).returncode == 0
    files = {
        "{bad}": tmp_path / "bad.yaml",
        "{unmapped}": prompt_file(tmp_path / "u.yaml", "other"),
        "{good}": prompt_file(tmp_path / "g.yaml"),
    }
    files["{bad}"].write_text("name: p1\nmodel: m\nmessages: [{role: user, content: '{{ config }}'}]\n")
    args = [str(files.get(a, a)) for a in args]
    result = cli(sqlite_url, *args, cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    if "dataset" in args[0] or args[0] == "submit":
        listed = json.loads(cli(sqlite_url, "dataset", "list", "--json").stdout)
        assert [d["name"] for d in listed] == ["d1"] and listed[0]["gates"] == []


def test_dataset_map_declares_the_extra_bars(sqlite_url, tmp_path):
    data = write_rule_rows(tmp_path / "d.csv", 4)
    assert cli(sqlite_url, "dataset", "add", "d1", "--source", str(data)).returncode == 0
    mapped = cli(
        sqlite_url,
        "dataset",
        "map",
        "p1",
        "d1",
        "--min-accuracy",
        "0.9",
        "--max-broken",
        "0",
        "--min-recall",
        "yes=0.95",
        "--min-recall",
        "no=0.8",
        "--min-precision",
        "YES=0.5",
        "--max-latency-p95-ms",
        "250",
        "--max-cost-per-1k-items",
        "0.10",
    )
    assert mapped.returncode == 0, mapped.stderr
    phrases = (
        "max broken 0, recall[no] ≥ 80%, recall[yes] ≥ 95%, precision[YES] ≥ 50%, p95 latency ≤ 250 ms, "
        "cost ≤ $0.10 per 1k items"
    )
    assert mapped.stdout.strip() == f"p1 × d1: min accuracy 0.9, {phrases}"
    typo = cli(sqlite_url, "dataset", "map", "p1", "d1", "--min-accuracy", "0.9", "--min-recall", "ye=0.9")
    assert (
        typo.returncode == 2 and "min_recall: dataset d1 has no item labelled 'ye' (its labels: no, yes)" in typo.stderr
    ), typo.stderr
    assert (
        cli(sqlite_url, "dataset", "map", "p2", "d1", "--min-accuracy", "0.5").stdout.strip()
        == "p2 × d1: min accuracy 0.5"
    )  # accuracy only: as before
    assert (
        cli(sqlite_url, "dataset", "list").stdout.split("\t")[-1].strip()
        == f"p1 ≥ 0.9 ({phrases}) [dataset map], p2 ≥ 0.5 [dataset map]"
    )
    listed = json.loads(cli(sqlite_url, "dataset", "list", "--json").stdout)
    assert listed[0]["gates"] == [
        {
            "prompt": "p1",
            "min_accuracy": "0.9",
            "bars": {
                "max_broken": 0,
                "min_recall": {"no": "0.8", "yes": "0.95"},
                "min_precision": {"YES": "0.5"},
                "max_latency_p95_ms": 250,
                "max_cost_per_1k_items": "0.10",
            },
            "declared_in": None,  # the CLI's mapping: a sync leaves it alone
        },
        {"prompt": "p2", "min_accuracy": "0.5", "bars": None, "declared_in": None},
    ]
    # mapping again replaces the bars as a whole
    assert (
        cli(sqlite_url, "dataset", "map", "p1", "d1", "--min-accuracy", "0.8", "--max-broken", "1").stdout.strip()
        == "p1 × d1: min accuracy 0.8, max broken 1"
    )
    assert json.loads(cli(sqlite_url, "dataset", "list", "--json").stdout)[0]["gates"][0]["bars"] == {"max_broken": 1}


def test_prices_lists_the_price_table_the_gate_config_declares(sqlite_url, tmp_path):
    assert cli(sqlite_url, "prices").stdout.startswith("no prices: declare them under prices:")
    assert json.loads(cli(sqlite_url, "prices", "--json").stdout) == []
    config = tmp_path / "gate.yaml"
    config.write_text("prices:\n  gpt-4o-mini: {input: 0.15, output: 0.60}\n  mock-1: {input: 2, output: 0.000125}\n")
    synced = cli(sqlite_url, "sync", config)
    assert synced.returncode == 0, synced.stderr
    assert "price gpt-4o-mini: new, $0.15 in / $0.60 out per 1M tokens" in synced.stdout
    listed = cli(sqlite_url, "prices")
    assert listed.returncode == 0 and listed.stdout.splitlines() == [
        "gpt-4o-mini\t$0.15 in / $0.60 out per 1M tokens",
        "mock-1\t$2.00 in / $0.000125 out per 1M tokens",
    ]
    assert json.loads(cli(sqlite_url, "prices", "--json").stdout) == [
        {"model": "gpt-4o-mini", "input_per_million": "0.15", "output_per_million": "0.6"},
        {"model": "mock-1", "input_per_million": "2", "output_per_million": "0.000125"},
    ]
    config.write_text("prices:\n  mock-1: {input: 2, output: -1}\n")
    refused = cli(sqlite_url, "sync", config)
    assert refused.returncode == 2 and "prices.mock-1.output: -1 is out of range" in refused.stderr
    assert len(json.loads(cli(sqlite_url, "prices", "--json").stdout)) == 2  # nothing changed


def test_server_database_needs_db_upgrade(mysql_url):
    result = cli(mysql_url, "dataset", "list")
    assert result.returncode == 2 and "promptgate db upgrade" in result.stderr


def test_concurrent_db_upgrade(mysql_url):
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: cli(mysql_url, "db", "upgrade"), range(4)))
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    assert sum("applied migrations" in r.stdout for r in results) == 1
    from sqlalchemy import text

    from gate.db import make_engine

    engine = make_engine(mysql_url)
    with engine.connect() as conn:
        versions = conn.execute(text("SELECT version FROM schema_migration ORDER BY version")).scalars().all()
        tables = set(conn.execute(text("SHOW TABLES")).scalars())
    engine.dispose()
    assert versions == [v for v, _, _ in migrations("mysql")]
    assert {
        "prompt",
        "prompt_version",
        "dataset",
        "prompt_dataset",
        "prompt_update",
        "prompt_run",
        "prompt_run_item",
        "worker",
    } <= tables


def test_wheel_installs_into_a_fresh_venv_with_migrations(installed_wheel, tmp_path):
    """The wheel, installed by pip with its declared dependencies into a fresh venv
    (``installed_wheel``: built and installed once per test run), runs `db upgrade` with
    the migrations it ships and finds its packaged examples, from another folder."""
    venv = installed_wheel
    work = tmp_path / "elsewhere"
    work.mkdir()
    # Nothing of the checkout may leak in: no PYTHONPATH, another working directory.
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}

    def run(*a):
        return subprocess.run(
            [venv / "bin" / "promptgate", "--database-url", "sqlite:///w.db", *a],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    shipped = ", ".join(str(version) for version, _, _ in migrations("sqlite"))
    assert run("db", "upgrade").stdout.strip() == f"applied migrations: {shipped}"  # every one, in order
    assert run("db", "upgrade").stdout.strip() == "schema is up to date"
    where = subprocess.run(
        [
            venv / "bin" / "python",
            "-c",
            "import gate, importlib.resources as r;"
            "print(gate.__file__); print(r.files('gate.example').joinpath('gate.yaml').is_file())",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert where[0].startswith(str(venv)) and where[1] == "True"


def test_a_migration_missing_below_the_latest_is_still_asked_for(mysql_url):
    """Migrations are applied by the set of versions, so one numbered below the latest
    applied (0004 merged after 0005 went in) is still pending: the schema check must see
    it too, not only compare the highest version."""
    assert cli(mysql_url, "db", "upgrade").returncode == 0
    from sqlalchemy import text

    from gate.db import make_engine

    engine = make_engine(mysql_url)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM schema_migration WHERE version = 2"))
    engine.dispose()
    result = cli(mysql_url, "dataset", "list")
    assert result.returncode == 2 and "promptgate db upgrade" in result.stderr and "2" in result.stderr


ACCOUNT_TIER = (
    "{% if item.account_tier is defined %}Tier {{ item.account_tier }}: {{ item.subject }}"
    "{% else %}Subject: {{ item.subject }}\n\n{{ item.text }}{% endif %}"
)


def account_tier_prompt(ws: Path) -> Path:
    """The example's ticket-urgency prompt, its user message branching on a field that no
    row of its datasets has (issue 23, item 6)."""
    path = ws / "prompts" / "ticket-urgency.yaml"
    spec = yaml.safe_load(path.read_text())
    spec["messages"][1]["content"] = ACCOUNT_TIER
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_template_branching_on_a_field_no_row_has_is_refused_at_submit_unless_declared_optional(mysql_url, tmp_path):
    """On MariaDB through the CLI: refused naming the field and both datasets, nothing
    staged; accepted once the gate config declares it optional, and the report shows what
    the templates read and how many rows have it."""
    from support.action_harness import make_workspace

    ws = make_workspace(tmp_path)
    assert cli(mysql_url, "db", "upgrade").returncode == 0
    assert cli(mysql_url, "sync", ws / "gate.yaml").returncode == 0
    prompt = account_tier_prompt(ws)
    refused = cli(mysql_url, "submit", prompt)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip().splitlines() == [
        "error: the gate cannot evaluate what account_tier changes: no row of urgency-hard, urgency-regression has "
        "it (add rows that do, or declare it under optional_fields: ticket-urgency: in the gate config)"
    ]
    from gate.domain import Gate

    gate = Gate.connect(mysql_url)
    try:
        assert gate.list_updates() == []  # nothing staged
    finally:
        gate.close()

    config = yaml.safe_load((ws / "gate.yaml").read_text())
    config["optional_fields"] = {"ticket-urgency": ["account_tier"]}
    (ws / "gate.yaml").write_text(yaml.safe_dump(config))
    synced = cli(mysql_url, "sync", ws / "gate.yaml")
    assert "prompt ticket-urgency: optional fields none → account_tier" in synced.stdout, synced.stdout
    accepted = cli(mysql_url, "submit", prompt, "--json")
    assert accepted.returncode == 0, accepted.stderr
    uid = json.loads(accepted.stdout)["id"]
    shown = cli(mysql_url, "status", uid).stdout
    for rows in (98, 16):  # urgency-regression.csv, urgency-hard.jsonl
        line = (
            f"    fields read: account_tier: 0 of {rows} rows (optional); subject: {rows} of {rows} rows; "
            f"text: {rows} of {rows} rows"
        )
        assert line in shown.splitlines(), shown
    runs = json.loads(cli(mysql_url, "status", uid, "--json").stdout)["runs"]
    assert {r["dataset"]: r["fields_read"][0] for r in runs} == {
        "urgency-regression": {"field": "account_tier", "rows": 0, "of": 98, "optional": True},
        "urgency-hard": {"field": "account_tier", "rows": 0, "of": 16, "optional": True},
    }


def test_max_drop_early_stop_and_full_from_the_command_line(sqlite_url, tmp_path):
    """`dataset map --max-drop --confidence --no-early-stop` and `submit --full`: the bars
    as the gate keeps them, and the most calls an update may make on stderr (stdout stays
    the id, for scripts)."""
    db_url = sqlite_url
    assert cli(db_url, "db", "upgrade").returncode == 0
    assert cli(db_url, "dataset", "add", "d1", "--source", str(write_rule_rows(tmp_path / "d.csv", 40))).returncode == 0
    mapped = cli(
        db_url,
        "dataset",
        "map",
        "p1",
        "d1",
        "--min-accuracy",
        "0.9",
        "--max-drop",
        "2",
        "--confidence",
        "0.9",
        "--no-early-stop",
    )
    assert mapped.returncode == 0, mapped.stderr
    assert mapped.stdout.strip() == "p1 × d1: min accuracy 0.9, max drop 2 pts, confidence 90%, early stop off"
    listed = json.loads(cli(db_url, "dataset", "list", "--json").stdout)
    assert listed[0]["gates"][0]["bars"] == {"max_drop": "2", "confidence": "0.9", "early_stop": False}
    refused = cli(db_url, "dataset", "map", "p1", "d1", "--min-accuracy", "0.9", "--max-drop", "0.02%")
    assert refused.returncode == 2 and "max_drop '0.02%' is not a number of accuracy points" in refused.stderr
    sub = cli(db_url, "submit", prompt_file(tmp_path / "p.yaml"), "--full")
    assert sub.returncode == 0 and sub.stdout.strip().isdigit(), sub.stderr
    assert (
        f"update {sub.stdout.strip()}: at most 40 model calls before retries (every item called (--full))" in sub.stderr
    )  # issue 35.8: it said "0 made, 0 reused" before anything ran
    shown = json.loads(cli(db_url, "status", sub.stdout.strip(), "--json").stdout)
    assert shown["full"] is True and shown["spend"]["calls_bound"] == 40
