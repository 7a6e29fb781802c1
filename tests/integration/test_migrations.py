"""Upgrading a gate that has history: a database at schema 3 with datasets, finished runs
and their items moves to dataset versions (0004) with its evidence intact, on MariaDB and
SQLite; on MariaDB, whose DDL commits statement by statement, an upgrade that stopped
half-way runs again to the end."""

from __future__ import annotations

from sqlalchemy import create_engine, text
from support.helpers import rules_spec, write_rule_rows

from gate import db
from gate.domain import Gate

V3_DATA = [
    "INSERT INTO dataset (id, name, source_uri, options, created_at) VALUES (7, 'd', '{src}', '{{}}', '2026-01-01')",
    "INSERT INTO prompt_dataset (prompt_name, dataset_id, min_accuracy, created_at) "
    "VALUES ('p1', 7, 0.5, '2026-01-01')",
    "INSERT INTO prompt_update (id, prompt_name, mode, status, candidate_config, candidate_hash, base_version, source, "
    "source_key, created_at) VALUES (3, 'p1', 'check', 'PASSED', '{{}}', '{hash}', 0, '{{}}', 'cli', '2026-01-01')",
    "INSERT INTO prompt_run (id, update_id, dataset_id, dataset_name, source_uri, source_options, status, "
    "min_accuracy, "
    "row_count, lease_until, created_at, finished_at) VALUES (5, 3, 7, 'd', '{src}', '{{}}', 'DONE', 0.5, 2, "
    "'2000-01-01', '2026-01-01', '2026-01-01')",
    "INSERT INTO prompt_run_item (id, run_id, item_id, input, expected_decision, actual_decision, verdict) VALUES "
    "(3000000000, 5, 'a', '{{\"text\": \"alpha\"}}', 'yes', 'yes', 'MATCH'), "
    "(3000000001, 5, 'b', '{{\"text\": \"beta\"}}', 'no', 'yes', 'MISMATCH')",
]


def at_schema_3(url: str, src: str) -> None:
    """The database as the previous release left it: migrations 1-3 and some history
    (item ids past 2**31, as a long-lived gate has)."""
    engine = create_engine(url)
    dialect = engine.dialect.name
    with engine.begin() as conn:
        conn.execute(
            text(
                f"CREATE TABLE {db.MIGRATION_TABLE} (version INT NOT NULL PRIMARY KEY, "
                "name VARCHAR(255) NOT NULL, applied_at VARCHAR(32) NOT NULL)"
            )
        )
    for version, name, sql in db.migrations(dialect)[:3]:
        with engine.begin() as conn:
            for statement in db.split_statements(sql):
                conn.execute(text(statement))
            conn.execute(text(f"INSERT INTO {db.MIGRATION_TABLE} VALUES (:v, :n, 'then')"), {"v": version, "n": name})
    with engine.begin() as conn:
        for statement in V3_DATA:
            conn.execute(text(statement.format(src=src, hash="0" * 64)))
    engine.dispose()


def test_upgrading_a_gate_with_history_keeps_its_evidence(db_url, tmp_path, monkeypatch):
    data = write_rule_rows(tmp_path / "d.csv", 10)
    at_schema_3(db_url, str(data))
    gate = Gate.connect(db_url, upgrade=True)
    assert db.current_version(gate.engine) == db.migrations(gate.engine.dialect.name)[-1][0]
    old = gate.status(3)
    assert old.status == "PASSED" and (old.runs[0].matches, old.runs[0].scored) == (1, 2)
    assert [f.item_id for f in old.runs[0].failures] == ["b"]
    submit_refused = None
    try:
        gate.submit(rules_spec("p1"), "check")
    except Exception as exc:  # no version yet: the message says what to do
        submit_refused = str(exc)
    assert submit_refused and "promptgate dataset refresh d" in submit_refused
    gate.refresh_dataset("d")
    uid = gate.submit(rules_spec("p1"), "check")
    assert gate.status(uid).runs[0].dataset_version_id == gate.dataset_version("d").id
    gate.close()


def test_an_upgrade_that_stopped_half_way_runs_again_to_the_end(mysql_url, tmp_path):
    at_schema_3(mysql_url, str(write_rule_rows(tmp_path / "d.csv", 4)))
    engine = create_engine(mysql_url)
    version, _, sql = db.migrations("mysql")[3]
    statements = db.split_statements(sql)
    with engine.connect() as conn:  # as if the connection died after the item table's first ALTER
        for statement in statements[:-2]:
            conn.execute(text(statement))
        conn.commit()
    engine.dispose()
    gate = Gate.connect(mysql_url, upgrade=True)
    assert db.current_version(gate.engine) == db.migrations("mysql")[-1][0]
    assert gate.status(3).runs[0].scored == 2
    gate.close()


def test_0012_numbers_existing_dataset_versions_per_dataset_in_id_order(db_url, tmp_path):
    """Versions imported before numbering (interleaved between two datasets, one of them
    still IMPORTING) get 1, 2, 3 … per dataset in id order; the next import continues the
    count, and a plain integer still names a version by its global id."""
    engine = create_engine(db_url)
    dialect = engine.dialect.name
    with engine.begin() as conn:
        conn.execute(
            text(
                f"CREATE TABLE {db.MIGRATION_TABLE} (version INT NOT NULL PRIMARY KEY, "
                "name VARCHAR(255) NOT NULL, applied_at VARCHAR(32) NOT NULL)"
            )
        )
    for version, name, sql in db.migrations(dialect):
        if version >= 12:
            break
        with engine.begin() as conn:
            for statement in db.split_statements(sql):
                conn.execute(text(statement))
            conn.execute(text(f"INSERT INTO {db.MIGRATION_TABLE} VALUES (:v, :n, 'then')"), {"v": version, "n": name})
    data = write_rule_rows(tmp_path / "d.csv", 4)
    with engine.begin() as conn:
        for ds_id, name in ((1, "a"), (2, "b")):
            conn.execute(
                text(
                    "INSERT INTO dataset (id, name, source_uri, options, created_at) "
                    "VALUES (:i, :n, :s, '{}', '2026-01-01')"
                ),
                {"i": ds_id, "n": name, "s": str(data)},
            )
        for vid, ds_id, status in (
            (1, 1, "READY"),
            (2, 2, "READY"),
            (3, 1, "IMPORTING"),
            (4, 1, "READY"),
            (5, 2, "READY"),
        ):
            conn.execute(
                text(
                    "INSERT INTO dataset_version (id, dataset_id, status, content_hash, row_count, "
                    "source_uri, source_options, created_at) VALUES (:v, :d, :s, :h, 0, 'x', '{}', "
                    "'2026-01-01')"
                ),
                {"v": vid, "d": ds_id, "s": status, "h": f"{vid:064d}"},
            )
        conn.execute(text("UPDATE dataset SET current_version_id = CASE id WHEN 1 THEN 4 ELSE 5 END"))
    engine.dispose()
    gate = Gate.connect(db_url, upgrade=True)
    try:
        with gate.engine.connect() as conn:
            numbers = dict(conn.execute(text("SELECT id, number FROM dataset_version ORDER BY id")).all())
        assert numbers == {1: 1, 2: 1, 3: None, 4: 2, 5: 2}
        assert [v.label for v in gate.dataset_versions("a")[1]] == ["v2", "v1"]
        assert gate.dataset_version("a", "v2").id == 4 and gate.dataset_version("b", 2).label == "v1"
        gate.refresh_dataset("a")  # real rows: a new version, the next number
        assert gate.dataset_version("a").label == "v3"
    finally:
        gate.close()
